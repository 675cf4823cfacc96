"""The lab's PostgreSQL: Debian's binaries playing the official ``postgres`` image.

- :func:`bindir` finds ``initdb``/``postgres``/``pg_ctl``/``psql`` in the newest
  ``/usr/lib/postgresql/<version>/bin`` (Debian's layout; nothing relies on /usr/local/bin or
  on the ``pg_wrapper`` links in /usr/bin).  ``LAB_PG_BINDIR`` overrides it.
- :func:`launch` maps a container whose image names ``postgres`` to the image's entrypoint
  (:mod:`rotate_lab.services.postgres_entrypoint`): ``PGDATA`` and the
  ``/docker-entrypoint-initdb.d`` mount are translated to the host directories of the pod's
  volumes, the server listens on the pod IP and the container's first port.
- OpenBao holds two credentials (seeded once by ``rotate lab up``, kept on restarts):
  ``secret/infra/postgres`` — the application login role the shop services use (username,
  password; the credential ``postgres`` of the example chain) — and
  ``secret/infra/postgres-admin`` — the superuser (``POSTGRES_PASSWORD`` at the first initdb;
  the admin connection of a live rotation).
- Roles seeded by the init script (ecommerce/31-postgres.yaml): the group role
  ``shop`` owns database ``shop`` and its table ``products``; ``app_a`` and ``app_b`` are
  members of it (same grants) — ``app_a`` logs in with the application password, ``app_b``
  has no password and NOLOGIN, ready for an "alternating users" rotation.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from rotate_lab.containers import Launch, first_port

Obj = dict[str, Any]

HOST = "postgres.db.svc.cluster.local"
PORT = 5432
DATABASE = "shop"
APP_USER = "app_a"
ALTERNATE_USER = "app_b"
SUPERUSER = "postgres"
BAO_PATH = "infra/postgres"
BAO_ADMIN_PATH = "infra/postgres-admin"
#: the image's defaults: where PGDATA and the init scripts live inside the container
IMAGE_PGDATA = "/var/lib/postgresql/data"
IMAGE_INITDB_DIR = "/docker-entrypoint-initdb.d"
_VERSION_DIR = re.compile(r"^\d+(\.\d+)?$")


class NoPostgres(Exception):
    """Debian's PostgreSQL server binaries are not installed."""


def bindir(root: Path = Path("/usr/lib/postgresql")) -> Path:
    """The newest ``<root>/<version>/bin`` holding ``postgres`` and ``initdb``."""
    override = os.environ.get("LAB_PG_BINDIR")
    if override:
        return Path(override)
    versions = sorted((p for p in root.glob("*") if _VERSION_DIR.match(p.name)),
                      key=lambda p: tuple(int(x) for x in p.name.split(".")), reverse=True)
    for version in versions:
        b = version / "bin"
        if (b / "postgres").is_file() and (b / "initdb").is_file():
            return b
    raise NoPostgres(f"no PostgreSQL server under {root}/<version>/bin (Debian/Ubuntu: "
                     "apt-get install postgresql; `make install` does it)")


def is_postgres_image(image: str) -> bool:
    name = image.lower().rsplit("/", 1)[-1]
    return name.split(":", 1)[0].split("@", 1)[0] == "postgres"


def host_path(container_path: str, mounts: dict[str, Path]) -> Path | None:
    """The host path of ``container_path`` through the container's volume mounts."""
    for mount_path, host in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        mount_path = mount_path.rstrip("/") or "/"
        if container_path == mount_path or container_path.startswith(mount_path + "/"):
            return host / container_path[len(mount_path):].lstrip("/")
    return None


def launch(container: Obj, env: dict[str, str], *, pod_ip: str, pod_dir: Path,
           mounts: dict[str, Path], base_env: dict[str, str], args: list[str]) -> Launch:
    """The image's entrypoint as a local process (see module docstring)."""
    try:
        binaries = bindir()
    except NoPostgres as exc:
        from rotate_lab.containers import UnknownImage

        raise UnknownImage(str(exc)) from None
    pgdata_in_image = env.get("PGDATA") or IMAGE_PGDATA
    # No volume at PGDATA: the container's own (ephemeral) filesystem, as in Docker.
    volume = next((host for path, host in mounts.items()
                   if host_path(pgdata_in_image, {path: host}) is not None), None)
    pgdata = host_path(pgdata_in_image, mounts) or pod_dir / "rootfs" / "pgdata"
    volume = volume or pgdata.parent
    initdb_dir = host_path(IMAGE_INITDB_DIR, mounts)
    full_env = {**base_env, **env,
                "PGDATA": str(pgdata), "LAB_PG_VOLUME": str(volume), "LAB_PG_BINDIR": str(binaries),
                "LAB_PG_SOCKET_DIR": str(pod_dir / "run"),
                "POD_IP": pod_ip, "PORT": str(first_port(container) or PORT)}
    if initdb_dir is not None:
        full_env["LAB_PG_INITDB_DIR"] = str(initdb_dir)
    return Launch([sys.executable, "-m", "rotate_lab.services.postgres_entrypoint", *args],
                  full_env, None, f"postgres ({binaries.parent.name})")


def bootstrap_section(password: str) -> dict[str, Any]:
    """The ``postgres`` section of a consumer's initial bootstrap document."""
    return {"host": HOST, "port": PORT, "user": APP_USER, "password": password,
            "database": DATABASE}


def seed_bao(addr: str, token: str, app_password: str, admin_password: str) -> str:
    """Make sure ``secret/infra/postgres`` and ``secret/infra/postgres-admin`` exist, writing
    the given passwords only where a path is missing (a restarted lab keeps its values: the
    server was initialised with them).  Returns the application password now in OpenBao."""
    from rotate_lab import openbao

    for path, user, password in ((BAO_ADMIN_PATH, SUPERUSER, admin_password),
                                 (BAO_PATH, APP_USER, app_password)):
        try:
            data, _ = openbao.get_secret(addr, token, path)
            current = str(data["password"])
        except (openbao.BaoError, KeyError):
            openbao.put_secret(addr, token, path, {"username": user, "password": password})
            current = password
        if path == BAO_PATH:
            app_password = current
    return app_password
