"""The lab's PostgreSQL: Debian's binaries playing the official ``postgres`` image.

- :func:`bindir` finds ``initdb``/``postgres``/``pg_ctl``/``psql`` in the newest
  ``/usr/lib/postgresql/<version>/bin`` (Debian's layout; nothing relies on /usr/local/bin or
  on the ``pg_wrapper`` links in /usr/bin).  ``LAB_PG_BINDIR`` overrides it.
- The node runs a container whose image names ``postgres`` as the image's entrypoint
  (:mod:`rotate_lab.systems.postgres_entrypoint`, started by
  :mod:`rotate_lab.cluster.node.images`) against these binaries.
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
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

HOST = "postgres.db.svc.cluster.local"
PORT = 5432
DATABASE = "shop"
APP_USER = "app_a"
ALTERNATE_USER = "app_b"
SUPERUSER = "postgres"
BAO_PATH = "infra/postgres"
BAO_ADMIN_PATH = "infra/postgres-admin"
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


def bootstrap_section(password: str) -> dict[str, Any]:
    """The ``postgres`` section of a consumer's initial bootstrap document."""
    return {"host": HOST, "port": PORT, "user": APP_USER, "password": password,
            "database": DATABASE}


def seed_bao(addr: str, token: str, app_password: str, admin_password: str) -> str:
    """Make sure ``secret/infra/postgres`` and ``secret/infra/postgres-admin`` exist, writing
    the given passwords only where a path is missing (a restarted lab keeps its values: the
    server was initialised with them).  Returns the application password now in OpenBao."""
    from rotate_lab.systems import openbao

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
