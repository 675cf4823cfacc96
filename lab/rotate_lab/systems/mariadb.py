"""MariaDB in the lab (``rotate lab up --with mariadb``): the provider of the credential
``mariadb``, rotated by the plug-in ``examples/provider-mariadb`` (``apply: mariadb``).

- The node runs a container whose image is ``mariadb`` as the image's entrypoint
  (:mod:`rotate_lab.systems.mariadb_entrypoint`, started by
  :mod:`rotate_lab.cluster.node.images`) against Debian's ``mariadbd`` (:func:`binaries`).
- OpenBao holds two credentials, seeded once by ``rotate lab up`` and kept on restarts:
  ``secret/infra/mariadb`` — the application account (``username``, ``password``; the
  credential ``mariadb``) — and ``secret/infra/mariadb-admin`` — ``root``, the admin
  connection of a rotation.
- The entrypoint's first start creates the accounts ``app_a`` (the Secret's password) and
  ``app_b`` (``ACCOUNT LOCK``, a random password), both with ``SELECT`` on database
  ``catalog`` and its table ``items`` — ready for an "alternating users" rotation.
- The chain's credential exists only in the chain ``up --with mariadb`` generates
  (:func:`add_to_chain`): a chain naming ``apply: mariadb`` is refused (exit 2) where the
  plug-in is not installed, and the packaged chain must plan everywhere.
"""

from __future__ import annotations

import re
import shutil
from importlib import metadata
from pathlib import Path

NAMESPACE = "mariadb"
HOST = "mariadb.mariadb.svc.cluster.local"
PORT = 3306
DATABASE = "catalog"
APP_USER = "app_a"
ALTERNATE_USER = "app_b"
ADMIN_USER = "root"
BAO_PATH = "infra/mariadb"
BAO_ADMIN_PATH = "infra/mariadb-admin"
#: where the image keeps its data (a volume in the lab's manifest)
DATA_PATH = "/var/lib/mysql"
#: the plug-in's entry point (group ``rotate.providers``) and where to get it
PLUGIN = "mariadb"
PLUGIN_SOURCE = "examples/provider-mariadb"
CHAIN_EXTRA = "mariadb.chain.yaml"


class NoMariaDb(Exception):
    """The server's binaries or the plug-in are missing; the message says how to get them."""


def _binary(name: str) -> Path | None:
    found = shutil.which(name)
    if found:
        return Path(found)
    for folder in (Path("/usr/sbin"), Path("/usr/bin")):
        if (folder / name).is_file():
            return folder / name
    return None


def binaries() -> tuple[Path, Path]:
    """``mariadbd`` and ``mariadb-install-db`` (Debian's ``mariadb-server``)."""
    server, install = _binary("mariadbd"), _binary("mariadb-install-db")
    if server is None or install is None:
        raise NoMariaDb("MariaDB is not installed (Debian/Ubuntu: apt-get install "
                        "mariadb-server; `make install` does it)")
    return server, install


def check_available() -> None:
    """What ``up --with mariadb`` needs before it starts anything: the server's binaries and
    the plug-in that provides ``apply: mariadb`` in this environment."""
    binaries()
    found = any(ep.name == PLUGIN for ep in metadata.entry_points(group="rotate.providers"))
    if not found:
        raise NoMariaDb(f"the plug-in for apply: {PLUGIN} is not installed: pip install "
                        f"./{PLUGIN_SOURCE} (`make install` does it)")


def seed_bao(addr: str, token: str, app_password: str, admin_password: str) -> None:
    """Make sure ``secret/infra/mariadb`` and ``secret/infra/mariadb-admin`` exist, writing
    the given passwords only where a path is missing (a restarted lab's server was
    initialised with the values there)."""
    from rotate_lab.systems import openbao

    for path, user, password in ((BAO_ADMIN_PATH, ADMIN_USER, admin_password),
                                 (BAO_PATH, APP_USER, app_password)):
        try:
            data, _ = openbao.get_secret(addr, token, path)
            str(data["password"])
        except (openbao.BaoError, KeyError):
            openbao.put_secret(addr, token, path, {"username": user, "password": password})


def add_to_chain(lab_dir: Path, packaged: Path) -> Path:
    """The lab's chain with the ``mariadb`` credential (``ecommerce/extras/``
    :data:`CHAIN_EXTRA`) inserted before ``services:``, and the ``mariadb`` namespace among
    ``consumers.namespaces`` (its Secret reader ``catalog``), in ``lab_dir/shop/`` (copied from
    ``packaged`` unless ``--services`` generated it already).  Returns the chain file."""
    target = lab_dir / "shop"
    if not (target / "rotate.yaml").is_file():
        shutil.copytree(packaged, target)
    chain = target / "rotate.yaml"
    text = chain.read_text()
    block = (packaged / "extras" / CHAIN_EXTRA).read_text()
    credential = "\n".join(line for line in block.splitlines()
                           if not line.startswith("#")) + "\n"
    text, found = re.subn(r"^services:$", credential.rstrip("\n") + "\n\nservices:", text,
                          count=1, flags=re.MULTILINE)
    namespaces = re.search(r"^  namespaces: \[(.*)\]$", text, flags=re.MULTILINE)
    if not found or namespaces is None:
        raise ValueError(f"{chain}: no `services:` or `consumers.namespaces` to extend")
    text = (text[:namespaces.start()] + f"  namespaces: [{namespaces.group(1)}, {NAMESPACE}]"
            + text[namespaces.end():])
    chain.write_text(text)
    return chain
