"""Real provider servers for adapter tests: ``redis-server`` and a throwaway PostgreSQL.

Both bind 127.0.0.1 on a free port and live in a fresh temporary directory.

PostgreSQL refuses to run as root, and the tests run as root in CI.  When we are root, the
cluster belongs to the Debian package's ``postgres`` system user: the directory is created
with ``tempfile.mkdtemp`` directly under the system temp dir (pytest's ``/tmp/pytest-of-root``
is 0700, which that user cannot traverse) and chowned to it, and ``initdb``/``postgres`` are
started with ``subprocess.Popen(user=, group=)`` (setuid/setgid in the child, no ``su``).
As any other user they simply run as that user.

The server runs with ``log_statement = all`` into ``DIR/postgres.log``, so tests can grep what
the server recorded.  ``pg_hba``: TCP logins need SCRAM-SHA-256; the Unix socket is not used.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rotate.core.waiting import Deadline, wait_for

SUPERUSER = "postgres"
SUPERUSER_PASSWORD = "fixture-superuser-pw"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


# --------------------------------------------------------------------------- redis


@dataclass
class RedisServer:
    host: str
    port: int
    password: str  # the requirepass the server started with
    dir: Path


@contextmanager
def redis_server(requirepass: str) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="rotate-redis-"))
    port = free_port()
    conf = tmp / "redis.conf"  # the password in a 0600 file, not in argv
    conf.write_text(f"port {port}\nbind 127.0.0.1\nrequirepass {requirepass}\nsave \"\"\n"
                    f"appendonly no\ndir {tmp}\n")
    conf.chmod(0o600)
    log = (tmp / "redis.log").open("wb")
    proc = subprocess.Popen([binary, str(conf)], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        wait_for(_listening("127.0.0.1", port, proc, tmp / "redis.log"),
                 deadline=Deadline.after(20), what="redis-server listening")
        yield RedisServer("127.0.0.1", port, requirepass, tmp)
    finally:
        _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def _listening(host: str, port: int, proc: subprocess.Popen[bytes],
               log: Path) -> Callable[[], bool | None]:
    def check() -> bool | None:
        if proc.poll() is not None:
            raise AssertionError("server exited: " + log.read_text(errors="replace")[-2000:])
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            return None

    return check


# --------------------------------------------------------------------------- postgres


@dataclass
class PostgresServer:
    host: str
    port: int
    dir: Path
    log: Path
    superuser: str = SUPERUSER
    superuser_password: str = SUPERUSER_PASSWORD

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def verifier(self, role: str, password: str) -> str:
        """The SCRAM-SHA-256 verifier libpq computes for ``password`` on a connection to this
        server (test set-up: a role created with it never puts the password in the log)."""
        import psycopg

        with psycopg.connect(host=self.host, port=self.port, user=self.superuser,
                             password=self.superuser_password, dbname="postgres",
                             autocommit=True, passfile="/dev/null") as conn:
            return conn.pgconn.encrypt_password(password.encode(), role.encode(),
                                                b"scram-sha-256").decode("ascii")

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement as the superuser (test set-up only: literals are fine here)."""
        import psycopg

        with psycopg.connect(host=self.host, port=self.port, user=self.superuser,
                             password=self.superuser_password, dbname="postgres",
                             autocommit=True, passfile="/dev/null") as conn:
            cur = conn.execute(statement, params or None)
            return list(cur.fetchall()) if cur.description is not None else []


def postgres_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def _run_as() -> dict[str, Any]:
    """Popen keywords that drop root to the ``postgres`` user; nothing for other users."""
    if os.geteuid() != 0:
        return {}
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and no 'postgres' system user to run PostgreSQL as")
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}


def _own(path: Path, run_as: dict[str, Any]) -> None:
    if run_as:
        os.chown(path, run_as["user"], run_as["group"])


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed")
    run_as = _run_as()
    tmp = Path(tempfile.mkdtemp(prefix="rotate-pg-"))
    _own(tmp, run_as)
    data, log, pwfile = tmp / "data", tmp / "postgres.log", tmp / "pwfile"
    pwfile.write_text(SUPERUSER_PASSWORD + "\n")
    pwfile.chmod(0o600)
    _own(pwfile, run_as)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "HOME": str(tmp)}
    subprocess.run(
        [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, f"--pwfile={pwfile}",
         "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8",
         "--no-sync"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp,
        **run_as)
    pwfile.unlink()
    port = free_port()
    logf = log.open("wb")
    _own(log, run_as)
    proc = subprocess.Popen(
        [str(bindir / "postgres"), "-D", str(data), "-k", str(tmp), "-p", str(port),
         "-c", "listen_addresses=127.0.0.1", "-c", "log_statement=all",
         "-c", "password_encryption=scram-sha-256", "-c", "fsync=off"],
        stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=tmp, **run_as)
    logf.close()
    server = PostgresServer("127.0.0.1", port, tmp, log)
    try:
        wait_for(_accepting(server, proc), deadline=Deadline.after(30),
                 what="postgres accepting logins")
        yield server
    finally:
        _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def _accepting(server: PostgresServer,
               proc: subprocess.Popen[bytes]) -> Callable[[], bool | None]:
    import psycopg

    def check() -> bool | None:
        if proc.poll() is not None:
            raise AssertionError("postgres exited: " + server.log_text()[-2000:])
        try:
            server.sql("SELECT 1")
            return True
        except psycopg.OperationalError:
            return None

    return check
