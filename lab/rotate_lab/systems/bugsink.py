"""Bugsink in the lab (``rotate lab up --with bugsink``): an init-only app, its credential
in OpenBao, and the two "images" the lab's kubelet plays for it
(:mod:`rotate_lab.cluster.node.bugsink_images`).

- ``bugsink/bugsink`` → :mod:`.bugsink_server` run *as a file* by the interpreter of
  Bugsink's own venv (:func:`python`): Bugsink pins ``python-dateutil==2.9.*`` while
  rotate's ``kubernetes>=37`` needs ``>=3``, so Bugsink cannot be installed into the lab's
  venv; ``make bugsink`` makes ``.venv-bugsink`` beside it.
- ``rotate-lab/bugsink-rotator`` → :mod:`.bugsink_rotator` (the lab's Python): the custom
  rotator the chain's ``apply: job`` runs.

Container paths (the Secret file, the data volume, ``ROTATE_VALUES_DIR``) are translated to
the host directories of the pod's volumes, as for PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

NAMESPACE = "bugsink"
BAO_PATH = "infra/bugsink"
ADMIN = "admin@shop.example"
#: where the data volume is mounted in the container
DATA_PATH = "/data"
PYTHON_ENV = "ROTATE_LAB_BUGSINK_PYTHON"
VENV_NAME = ".venv-bugsink"


class NoBugsink(Exception):
    """Bugsink's venv is not there."""


def python() -> Path:
    """The interpreter of Bugsink's venv: ``$ROTATE_LAB_BUGSINK_PYTHON``, else
    ``.venv-bugsink`` beside the lab's own venv, else one whose ``bugsink-manage`` is on
    PATH."""
    candidates: list[Path] = []
    if os.environ.get(PYTHON_ENV):
        candidates.append(Path(os.environ[PYTHON_ENV]))
    candidates.append(Path(sys.prefix).parent / VENV_NAME / "bin" / "python")
    manage = shutil.which("bugsink-manage")
    if manage:
        candidates.append(Path(manage).parent / "python")
    for path in candidates:
        if path.exists() and (path.parent / "bugsink-manage").exists():
            return path
    raise NoBugsink(f"Bugsink is not installed: run `make bugsink` (it makes {VENV_NAME} with "
                    f"`pip install bugsink`), or set {PYTHON_ENV} to the python of a venv "
                    "that has it")


def seed_bao(addr: str, token: str, password: str) -> str:
    """Make sure ``secret/infra/bugsink`` exists (``password`` written only when missing: a
    restarted lab's Bugsink was initialised with the value there).  The value now there."""
    from rotate_lab.systems import openbao

    try:
        data, _ = openbao.get_secret(addr, token, BAO_PATH)
        return str(data["password"])
    except (openbao.BaoError, KeyError):
        openbao.put_secret(addr, token, BAO_PATH, {"password": password})
        return password
