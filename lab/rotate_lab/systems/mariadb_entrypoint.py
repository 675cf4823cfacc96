"""The lab's ``mariadb`` image entrypoint: what the official image's docker-entrypoint.sh does.

Run by the kubelet as ``python -m rotate_lab.systems.mariadb_entrypoint`` with the container's
environment plus what the lab maps (:func:`rotate_lab.cluster.node.images.mariadb_launch`):
``LAB_MARIADB_VOLUME`` (the host directory of the volume at ``/var/lib/mysql``),
``LAB_MARIADB_SOCKET``, ``LAB_MARIADBD``, ``LAB_MARIADB_INSTALL_DB``, ``POD_IP`` and ``PORT``.

Invariants, the official image's:

- ``MARIADB_ROOT_PASSWORD``, ``MARIADB_USER`` and ``MARIADB_PASSWORD`` are read by the
  *first* start only, when the volume holds no data directory; every later start ignores
  them — a new value in the Secret followed by a restart changes nothing (the reason for
  ``apply: mariadb``).  Lab extension: ``MARIADB_USERS`` (``a,b``) names the alternating
  accounts; the one that is not ``MARIADB_USER`` is created ``ACCOUNT LOCK``ed with a random
  password.  Both get ``SELECT`` on ``MARIADB_DATABASE``, which holds the table ``items``.
- No password reaches a statement: accounts are created ``IDENTIFIED BY PASSWORD`` with the
  ``mysql_native_password`` hash computed here; the initialising server runs without
  networking and without the general log.
- The first start initialises a staging directory, renamed to the data directory only once
  every statement succeeded: a start killed half-way initialises again.
- It finally *execs* ``mariadbd`` (the pid the kubelet recorded is the server's) with the
  general query log on in ``general.log`` of the volume — so a test can prove no password
  ever reached a statement — and no ``*_PASSWORD`` variable in its environment.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ITEMS = (("espresso cup", "7.50"), ("tea pot", "24.00"), ("coffee grinder", "89.90"))


class EntrypointError(Exception):
    """Start-up cannot go on; the message says why (never a secret)."""


def say(message: str) -> None:
    print(f"lab mariadb entrypoint: {message}", file=sys.stderr, flush=True)


def native_hash(password: str) -> str:
    """``mysql_native_password``'s stored form: ``*`` + upper hex SHA1(SHA1(password))."""
    inner = hashlib.sha1(password.encode("utf-8")).digest()
    return "*" + hashlib.sha1(inner).hexdigest().upper()


def server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.endswith("_PASSWORD")}


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, env=server_env(), stdin=subprocess.DEVNULL, check=False,
                          capture_output=True)
    if done.returncode != 0:
        raise EntrypointError(f"{Path(argv[0]).name} exited with status {done.returncode}: "
                              + done.stderr.decode(errors="replace")[-500:])


def _session(sock: Path, proc: subprocess.Popen[bytes], deadline: float) -> Any:
    import pymysql

    while True:
        if proc.poll() is not None:
            raise EntrypointError("the initialising mariadbd exited")
        try:
            return pymysql.connect(unix_socket=str(sock), user="root", autocommit=True)
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise EntrypointError("the initialising mariadbd did not answer within 60 s")\
                    from None
            time.sleep(0.1)


def statements() -> list[tuple[str, tuple[str, ...]]]:
    """The first start's statements (hashes only, never a password)."""
    root_pw = os.environ.get("MARIADB_ROOT_PASSWORD", "")
    user, password = os.environ.get("MARIADB_USER", ""), os.environ.get("MARIADB_PASSWORD", "")
    database = os.environ.get("MARIADB_DATABASE", "catalog")
    if not (root_pw and user and password):
        raise EntrypointError("database is uninitialized and MARIADB_ROOT_PASSWORD, "
                              "MARIADB_USER or MARIADB_PASSWORD is not set")
    users = [u for u in os.environ.get("MARIADB_USERS", user).split(",") if u] or [user]
    if user not in users:
        raise EntrypointError(f"MARIADB_USER {user!r} is not one of MARIADB_USERS")
    out: list[tuple[str, tuple[str, ...]]] = [
        ("CREATE USER 'root'@'%%' IDENTIFIED BY PASSWORD %s", (native_hash(root_pw),)),
        ("GRANT ALL PRIVILEGES ON *.* TO 'root'@'%%' WITH GRANT OPTION", ()),
        (f"CREATE DATABASE `{database}`", ()),
        (f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
         "price DECIMAL(10, 2) NOT NULL)", ()),
    ]
    out += [(f"INSERT INTO `{database}`.items VALUES (%s, %s, %s)", (str(i), name, price))
            for i, (name, price) in enumerate(ITEMS, start=1)]
    for name in users:
        active = name == user
        secret = password if active else secrets.token_urlsafe(24)
        out.append(("CREATE USER %s@'%%' IDENTIFIED BY PASSWORD %s"
                    + ("" if active else " ACCOUNT LOCK"), (name, native_hash(secret))))
        out.append((f"GRANT SELECT ON `{database}`.* TO %s@'%%'", (name,)))
    return out


def first_start(volume: Path, datadir: Path, sock: Path) -> None:
    todo = statements()
    staging = volume / "data.init"
    shutil.rmtree(staging, ignore_errors=True)
    say(f"initialising a new data directory in {datadir}")
    _run([os.environ["LAB_MARIADB_INSTALL_DB"], "--no-defaults", f"--datadir={staging}",
          "--user=root", "--auth-root-authentication-method=socket", "--skip-test-db"])
    proc = subprocess.Popen(
        [os.environ["LAB_MARIADBD"], "--no-defaults", f"--datadir={staging}",
         "--skip-networking", f"--socket={sock}", "--user=root", "--skip-log-bin",
         "--innodb-buffer-pool-size=16M", f"--pid-file={volume}/init.pid"],
        env=server_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        conn = _session(sock, proc, time.monotonic() + 60)
        with conn.cursor() as cur:
            for statement, params in todo:
                cur.execute(statement, params)  # always formatted: %% is a literal %
            cur.execute("SHUTDOWN")
        conn.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    os.rename(staging, datadir)


def main() -> int:
    try:
        volume = Path(os.environ["LAB_MARIADB_VOLUME"])
        sock = Path(os.environ["LAB_MARIADB_SOCKET"])
        volume.mkdir(parents=True, exist_ok=True)
        sock.parent.mkdir(parents=True, exist_ok=True)
        datadir = volume / "data"
        if (datadir / "mysql").is_dir():
            say("the data directory holds a database; skipping initialisation "
                "(MARIADB_*PASSWORD are not read)")
        else:
            first_start(volume, datadir, sock)
        argv = [os.environ["LAB_MARIADBD"], "--no-defaults", f"--datadir={datadir}",
                f"--port={os.environ.get('PORT', '3306')}",
                f"--bind-address={os.environ.get('POD_IP', '127.0.0.1')}",
                f"--socket={sock}", "--user=root", "--skip-name-resolve", "--skip-log-bin",
                "--innodb-buffer-pool-size=16M", f"--pid-file={volume}/mysqld.pid",
                "--general-log=1", f"--general-log-file={volume}/general.log",
                "--max-connections=500"]
        say("starting mariadbd")
        os.execve(argv[0], argv, server_env())
    except (EntrypointError, KeyError, OSError) as exc:
        say(f"error: {type(exc).__name__}: {exc}" if isinstance(exc, EntrypointError)
            else f"error: {type(exc).__name__}")
        return 1
    return 0  # not reached: execve replaced this process


if __name__ == "__main__":
    sys.exit(main())
