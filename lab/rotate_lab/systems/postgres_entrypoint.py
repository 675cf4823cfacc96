"""The lab's ``postgres`` image entrypoint: what the official image's docker-entrypoint.sh does.

Run by the kubelet as ``python -m rotate_lab.systems.postgres_entrypoint [postgres] [ARGS]``
(the container's command/args, as for the official image) with the container's environment
plus what the lab maps (see :mod:`rotate_lab.systems.postgres`): ``PGDATA`` (a directory inside
``LAB_PG_VOLUME``, the host directory of the StatefulSet's volume), ``LAB_PG_BINDIR``,
``LAB_PG_INITDB_DIR``, ``LAB_PG_SOCKET_DIR``, ``POD_IP`` and ``PORT``.  Standard library
only, so the pod starts fast.

Invariants, the official image's:

- ``POSTGRES_PASSWORD`` is used by the *first* start only, when ``PGDATA`` holds no cluster:
  ``initdb --pwfile`` (a 0600 file removed at once; never argv) creates the superuser
  ``POSTGRES_USER`` (default ``postgres``).  Every later start ignores it: a new value in the
  Secret followed by a restart changes nothing — the trap rotation has to get right.
- ``password_encryption = scram-sha-256``; ``pg_hba.conf`` gets ``host all all all
  scram-sha-256`` (local socket connections stay ``trust``, as in the image).
- Once, after ``initdb``, the ``*.sql`` files of ``LAB_PG_INITDB_DIR`` run in name order
  through ``psql`` against a temporary server that listens only on its private socket, with
  statement logging off.  Lab extension: for every environment variable ``X_PASSWORD``
  the scripts also see ``X_PASSWORD_SCRAM``, the SCRAM-SHA-256 verifier computed here, so a
  script can ``\\getenv`` it and create a login role without a plain-text password in any
  statement.
- Root may not run PostgreSQL: started as uid 0 (CI, tests) it hands the volume and the
  socket directory to the ``postgres`` system user (Debian's package creates it; each becomes
  its own, mode 0700, and a parent directory it has to make is 0711) and drops to it, as the
  image does with gosu.  Run by anyone else it runs as that user.  That user must search
  every parent of those two directories (a root lab places them in its runtime directory for
  this, :mod:`rotate_lab.host.runtime_dir`), but not of the init scripts: they are read
  before dropping privileges and fed to ``psql`` on stdin.  It then works in the volume, not
  in the directory it was started in, which that user may not reach.
- It finally *execs* ``postgres``: the pid the kubelet recorded is the postmaster's.  No
  ``*_PASSWORD`` variable is left in the server's environment.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RUN_AS = os.environ.get("LAB_PG_RUN_USER", "postgres")
SCRAM_ITERATIONS = 4096


class EntrypointError(Exception):
    """Start-up cannot go on; the message says why and what to do (never a secret)."""


def say(message: str) -> None:
    print(f"lab postgres entrypoint: {message}", file=sys.stderr, flush=True)


def scram_verifier(password: str, *, salt: bytes | None = None,
                   iterations: int = SCRAM_ITERATIONS) -> str:
    """The ``SCRAM-SHA-256$iter:salt$StoredKey:ServerKey`` verifier PostgreSQL stores (RFC 7677;
    what ``psql \\password`` computes on the client).  ASCII passwords need no SASLprep."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode("ascii")

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def _bin(name: str) -> str:
    bindir = os.environ.get("LAB_PG_BINDIR", "")
    path = Path(bindir) / name
    if not bindir or not path.is_file():
        raise EntrypointError(f"{name} not found in LAB_PG_BINDIR={bindir!r}")
    return str(path)


def _run(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> None:
    if stdin is None:
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, check=False)
    else:
        done = subprocess.run(argv, env=env, input=stdin, check=False)
    if done.returncode != 0:
        raise EntrypointError(f"{Path(argv[0]).name} exited with status {done.returncode}")


def drop_privileges(paths: list[Path]) -> None:
    """As root: give ``paths`` to the unprivileged user and become it (PostgreSQL refuses
    to run as root)."""
    if os.getuid() != 0:
        return
    try:
        user = pwd.getpwnam(RUN_AS)
    except KeyError:
        raise EntrypointError(
            f"running as root, and there is no user {RUN_AS!r} to run PostgreSQL as "
            "(root may not): install Debian's postgresql package, which creates it, or "
            f"`useradd --system {RUN_AS}`") from None
    for path in paths:
        _make_parents(path)
        path.mkdir(exist_ok=True)
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                if os.lstat(name).st_uid != user.pw_uid:
                    os.lchown(name, user.pw_uid, user.pw_gid)
        os.chmod(path, 0o700)
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)
    os.environ.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name)


def _make_parents(path: Path) -> None:
    """Make the missing parents of ``path``, each 0711 whatever the umask: the server's
    user passes through them, nobody lists them."""
    missing = [p for p in path.parents if not p.exists()]
    for parent in reversed(missing):
        parent.mkdir(exist_ok=True)
        os.chmod(parent, 0o711)


def check_reachable(path: Path) -> None:
    try:
        os.stat(path)
    except PermissionError:
        raise EntrypointError(
            f"user {pwd.getpwuid(os.getuid()).pw_name!r} (uid {os.getuid()}) cannot reach "
            f"{path}: every parent directory must be searchable by it (root runs PostgreSQL "
            "as this unprivileged user). The lab's kubelet puts a root lab's volume and "
            "socket directory in its runtime directory under /tmp; run by hand, point "
            "LAB_PG_VOLUME and LAB_PG_SOCKET_DIR at a directory that user can reach") from None


def server_env() -> dict[str, str]:
    """The environment without any ``*_PASSWORD`` variable (nor its verifier)."""
    return {k: v for k, v in os.environ.items()
            if not (k.endswith("_PASSWORD") or k.endswith("_PASSWORD_SCRAM"))}


def initdb(pgdata: Path, superuser: str, password: str) -> None:
    pgdata.mkdir(parents=True, exist_ok=True)
    os.chmod(pgdata, 0o700)
    # beside PGDATA, in the volume (0700, the server's): $TMPDIR may be the lab user's
    with tempfile.TemporaryDirectory(prefix="lab-pg-init-", dir=pgdata.parent) as private:
        pwfile = Path(private) / "pwfile"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(password + "\n")
        say(f"initdb: a new cluster in {pgdata} (superuser {superuser})")
        # --no-sync: lab data; a crash of the *machine* is out of scope (fsync stays on for
        # the server itself, so a killed pod loses nothing it committed).
        _run([_bin("initdb"), "-D", str(pgdata), "-U", superuser, f"--pwfile={pwfile}",
              "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
              "--no-locale", "--no-sync"], server_env())
    with open(pgdata / "postgresql.conf", "a", encoding="utf-8") as conf:
        conf.write("\n# rotate lab (as the official image)\n"
                   "password_encryption = 'scram-sha-256'\n")
    with open(pgdata / "pg_hba.conf", "a", encoding="utf-8") as hba:
        hba.write("\n# rotate lab: pods reach the server on its pod IP\n"
                  "host all all all scram-sha-256\n")


def read_init_scripts() -> list[tuple[str, bytes]]:
    """The ``*.sql`` files of ``LAB_PG_INITDB_DIR`` in name order, (name, text): read by
    whoever starts the entrypoint, before it drops privileges."""
    init_dir = os.environ.get("LAB_PG_INITDB_DIR", "")
    try:
        paths = sorted(Path(init_dir).glob("*.sql")) if init_dir else []
        return [(p.name, p.read_bytes()) for p in paths]
    except OSError as exc:
        raise EntrypointError(f"cannot read the init scripts in {init_dir} "
                              f"({exc.strerror or type(exc).__name__})") from None


def run_init_scripts(pgdata: Path, socket_dir: Path, superuser: str,
                     scripts: list[tuple[str, bytes]]) -> None:
    if not scripts:
        return
    env = server_env()
    env.update({f"{k}_SCRAM": scram_verifier(v) for k, v in os.environ.items()
                if k.endswith("_PASSWORD") and v})
    pg_ctl = _bin("pg_ctl")
    options = (f"-c listen_addresses='' -c unix_socket_directories='{socket_dir}' "
               "-c log_statement=none")
    _run([pg_ctl, "-D", str(pgdata), "-o", options, "-w", "-t", "30", "-l",
          str(pgdata / "init-server.log"), "start"], server_env())
    try:
        for name, text in scripts:
            say(f"running {name}")
            _run([_bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(socket_dir),
                  "-U", superuser, "-d", "postgres", "-f", "-"], env, stdin=text)
    finally:
        _run([pg_ctl, "-D", str(pgdata), "-m", "fast", "-w", "-t", "30", "stop"],
             server_env())


def first_start(pgdata: Path, socket_dir: Path, superuser: str,
                scripts: list[tuple[str, bytes]]) -> None:
    """initdb and the init scripts in a staging directory, renamed to ``PGDATA`` only once
    all succeeded: a first start killed half-way leaves no cluster, so the next start
    initialises again instead of serving one without its roles."""
    password = os.environ.get("POSTGRES_PASSWORD", "")
    if not password:
        raise EntrypointError("database is uninitialized and POSTGRES_PASSWORD is not set "
                              "(the official image refuses too)")
    staging = pgdata.with_name(pgdata.name + ".initdb")
    shutil.rmtree(staging, ignore_errors=True)
    initdb(staging, superuser, password)
    run_init_scripts(staging, socket_dir, superuser, scripts)
    shutil.rmtree(pgdata, ignore_errors=True)
    os.rename(staging, pgdata)


def server_argv(args: list[str], socket_dir: Path) -> list[str]:
    if args and args[0] == "postgres":
        args = args[1:]
    return [_bin("postgres"), "-D", os.environ["PGDATA"],
            "-c", f"listen_addresses={os.environ.get('POD_IP', '127.0.0.1')}",
            "-p", os.environ.get("PORT", "5432"),
            "-c", f"unix_socket_directories={socket_dir}", *args]


def main(args: list[str]) -> int:
    try:
        pgdata = Path(os.environ["PGDATA"])
        socket_dir = Path(os.environ.get("LAB_PG_SOCKET_DIR") or pgdata.parent / "run")
        volume = Path(os.environ.get("LAB_PG_VOLUME") or pgdata.parent)
        if pgdata == volume:
            raise EntrypointError("PGDATA is the volume's root: set it to a subdirectory, "
                                  "e.g. /var/lib/postgresql/data/pgdata (as the image's "
                                  "documentation advises)")
        scripts = read_init_scripts()
        drop_privileges([volume, socket_dir])
        check_reachable(volume)
        volume.mkdir(parents=True, exist_ok=True)
        socket_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(socket_dir, 0o700)
        os.chdir(volume)
        superuser = os.environ.get("POSTGRES_USER") or "postgres"
        if (pgdata / "PG_VERSION").exists():
            say("PostgreSQL database directory appears to contain a database; "
                "skipping initialization (POSTGRES_PASSWORD is not read)")
        else:
            first_start(pgdata, socket_dir, superuser, scripts)
        argv = server_argv(args, socket_dir)
        say("starting postgres")
        os.execve(argv[0], argv, server_env())
    except EntrypointError as exc:
        say(f"error: {exc}")
        return 1
    return 0  # not reached: execve replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
