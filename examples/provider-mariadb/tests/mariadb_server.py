"""A real MariaDB for the plug-in's tests (the fixture is in conftest.py): Debian's
``mariadbd`` on 127.0.0.1, a free port and a private datadir, stopped by its pid.  Its general
query log records every statement, so the tests can prove no password is sent."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest
from passlib.hash import mysql41

ADMIN, ADMIN_PASSWORD = "rotator", "admin-pw-0123456789abcdef"


def _binary(name: str) -> str:
    found = shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/usr/bin") / name) if p.exists()), None)
    if found is None:
        pytest.fail(f"{name} is missing: install Debian's mariadb-server (make install does)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MariaDb:
    host: str
    port: int
    datadir: Path

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """One statement as the admin (test set-up: literals are fine here)."""
        conn = pymysql.connect(host=self.host, port=self.port, user=ADMIN,
                               password=ADMIN_PASSWORD, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params or None)
                return list(cur.fetchall())
        finally:
            conn.close()

    def account(self, name: str, password: str, *, locked: bool = False,
                grant: str = "SELECT ON shop.*") -> None:
        """An account holding ``password`` (its hash), with ``grant``."""
        self.sql("CREATE USER %s@'%%' IDENTIFIED BY PASSWORD %s "
                 + ("ACCOUNT LOCK" if locked else ""), name, mysql41.hash(password))
        self.sql(f"GRANT {grant} TO %s@'%%'", name)

    def log_text(self) -> str:
        return (self.datadir / "general.log").read_text(errors="replace")


def _wait_for_socket(sock: Path, proc: subprocess.Popen[bytes], deadline: float) -> Any:
    """The root session over the unix socket, once the server takes it (polled until the
    deadline; the server exiting first fails at once with its error log)."""
    while True:
        if proc.poll() is not None:
            raise AssertionError("mariadbd exited: "
                                 + (sock.parent / "error.log").read_text()[-2000:])
        try:
            return pymysql.connect(unix_socket=str(sock), user="root", autocommit=True)
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def start(datadir: Path) -> tuple[MariaDb, subprocess.Popen[bytes]]:
    """Initialise ``datadir``, start the server, create the admin account and a database."""
    data = datadir / "data"
    subprocess.run([_binary("mariadb-install-db"), "--no-defaults", f"--datadir={data}",
                    "--user=root", "--auth-root-authentication-method=socket",
                    "--skip-test-db"], check=True, capture_output=True)
    port, sock = free_port(), datadir / "mysqld.sock"
    proc = subprocess.Popen(
        [_binary("mariadbd"), "--no-defaults", f"--datadir={data}", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={sock}", f"--pid-file={datadir}/mysqld.pid",
         "--user=root", "--skip-name-resolve", "--general-log=1",
         f"--general-log-file={datadir}/general.log", f"--log-error={datadir}/error.log",
         "--innodb-buffer-pool-size=16M", "--skip-log-bin"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        root = _wait_for_socket(sock, proc, time.monotonic() + 60)
        with root.cursor() as cur:
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY PASSWORD %s",
                        (ADMIN, mysql41.hash(ADMIN_PASSWORD)))
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO %s@'%%' WITH GRANT OPTION", (ADMIN,))
            cur.execute("CREATE DATABASE shop")
        root.close()
    except BaseException:
        stop(proc)
        raise
    return MariaDb("127.0.0.1", port, datadir), proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server by its pid: TERM, then KILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
