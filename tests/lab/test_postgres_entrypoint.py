"""The lab's postgres entrypoint run directly, outside a lab: the paths the lab tests (run as
root in CI) do not take.

- run by an unprivileged user it runs PostgreSQL as that user, initialises the cluster and
  runs the init scripts, whose login role gets the verifier the entrypoint computed;
- run by root with a data directory the ``postgres`` user cannot reach, it stops with a
  message that says why and what to do.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from rotate_lab.systems import postgres

from tests.support.polling import eventually

pytestmark = pytest.mark.lab


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory every user can search (PostgreSQL may run as ``postgres`` here)."""
    path = Path(tempfile.mkdtemp(prefix="rotate-test-pg-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def entrypoint_env(base: Path, port: int, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PGDATA": str(base / "volume" / "pgdata"), "LAB_PG_VOLUME": str(base / "volume"),
            "LAB_PG_BINDIR": str(postgres.bindir()), "LAB_PG_SOCKET_DIR": str(base / "run"),
            "LAB_PG_INITDB_DIR": str(base / "initdb"), "POD_IP": "127.0.0.1",
            "PORT": str(port), **extra}


def spawn_entrypoint(env: dict[str, str], log: Path, user: str | None) -> int:
    """Fork, become ``user`` (if given), and run the entrypoint's ``main`` in the child, which
    execs postgres: the venv's interpreter may live where that user cannot exec it (/root)."""
    from rotate_lab.systems import postgres_entrypoint

    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        if user is not None:
            entry = pwd.getpwnam(user)
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
        os.environ.clear()
        os.environ.update(env)
        code = postgres_entrypoint.main(["postgres"])
    finally:
        os._exit(code)


def psql(port: int, user: str, password: str, sql: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(postgres.bindir() / "psql"), "-XAt", "-h", "127.0.0.1", "-p", str(port),
         "-U", user, "-d", "postgres", "-c", sql],
        env={**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "3"},
        capture_output=True, text=True, timeout=20, check=False)


def test_an_unprivileged_user_initialises_and_serves(base: Path) -> None:
    (base / "initdb").mkdir()
    (base / "initdb" / "10-app.sql").write_text(
        "\\getenv verifier POSTGRES_APP_PASSWORD_SCRAM\n"
        "CREATE ROLE app LOGIN PASSWORD :'verifier';\n")
    (base / "volume").mkdir()
    (base / "run").mkdir()
    run_as: str | None = None
    if os.getuid() == 0:  # be the unprivileged user the lab would drop to
        user = pwd.getpwnam("postgres")
        for path in (base / "volume", base / "initdb", base / "run"):
            os.chown(path, user.pw_uid, user.pw_gid)
        run_as = "postgres"
    port = free_port()
    app_password, super_password = "AppPassword" + "y" * 29, "Super" + "z" * 35
    log = base / "entrypoint.log"
    pid = spawn_entrypoint(entrypoint_env(base, port, POSTGRES_PASSWORD=super_password,
                                          POSTGRES_APP_PASSWORD=app_password), log, run_as)

    def logged_in() -> str | None:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            raise AssertionError(f"the entrypoint exited:\n{log.read_text()[-2000:]}")
        r = psql(port, "app", app_password, "SELECT current_user")
        return r.stdout.strip() if r.returncode == 0 else None

    try:
        assert eventually(logged_in, 30, "a login as the seeded role") == "app"
        assert psql(port, "app", "wrong-password-0123456789", "SELECT 1").returncode != 0
        status = Path(f"/proc/{pid}/status").read_text()
        uid = int(next(x for x in status.splitlines() if x.startswith("Uid:")).split()[1])
        assert uid != 0
        assert Path(f"/proc/{pid}/exe").resolve().name == "postgres"  # exec'd, same pid
    finally:
        os.killpg(pid, signal.SIGINT)  # fast shutdown, the image's STOPSIGNAL
        eventually(lambda: os.waitpid(pid, os.WNOHANG)[0] == pid or None, 20,
                   "postgres to stop")
    output = log.read_text(errors="replace")  # initdb's and the server's output
    assert "database system is shut down" in output
    assert app_password not in output and super_password not in output


@pytest.mark.skipif(os.getuid() != 0, reason="only root hands PostgreSQL to another user")
def test_root_with_an_unreachable_directory_says_what_to_do(base: Path) -> None:
    private = base / "private"
    private.mkdir(mode=0o700)
    env = entrypoint_env(private, free_port(), POSTGRES_PASSWORD="Super" + "z" * 35)
    done = subprocess.run(
        [sys.executable, "-m", "rotate_lab.systems.postgres_entrypoint"], env=env,
        capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1
    assert "cannot reach" in done.stderr and "every parent directory" in done.stderr
    assert "Traceback" not in done.stderr
