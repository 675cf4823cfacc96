"""Bugsink in the lab (``rotate lab up --with bugsink``): an init-only app, its credential
in OpenBao, and the two "images" the lab's kubelet plays for it.

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
from typing import Any

from rotate_lab.cluster.node.containers import Launch, UnknownImage, first_port

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


def _host(container_path: str, mounts: dict[str, Path]) -> Path | None:
    from rotate_lab.cluster.node.images import host_path

    return host_path(container_path, mounts)


def server_launch(container: dict[str, Any], env: dict[str, str], *, pod_ip: str,
                  pod_dir: Path, mounts: dict[str, Path], base_env: dict[str, str]) -> Launch:
    try:
        interpreter = python()
    except NoBugsink as exc:
        raise UnknownImage(str(exc)) from None
    data = _host(DATA_PATH, mounts) or pod_dir / "rootfs" / "data"
    password_file = _host(env.get("CREATE_SUPERUSER_PASSWORD_FILE", ""), mounts)
    full = {**base_env, **env, "BUGSINK_DATA": str(data), "POD_IP": pod_ip,
            "PORT": str(first_port(container) or 8000),
            "CREATE_SUPERUSER_PASSWORD_FILE": str(password_file or "")}
    script = Path(__file__).with_name("bugsink_server.py")
    return Launch([str(interpreter), str(script)], full, None, "bugsink")


def rotator_launch(env: dict[str, str], *, lab_dir: Path, mounts: dict[str, Path],
                   base_env: dict[str, str]) -> Launch:
    values = _host(env.get("ROTATE_VALUES_DIR", "/var/run/rotate"), mounts)
    full = {**base_env, **env, "ROTATE_VALUES_DIR": str(values or ""),
            "LAB_HOSTS_FILE": str(lab_dir / "hosts"),
            "LAB_FAULTS_FILE": str(lab_dir / "faults.json")}
    return Launch([sys.executable, "-m", "rotate_lab.systems.bugsink_rotator"], full, None,
                  "bugsink-rotator")


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
