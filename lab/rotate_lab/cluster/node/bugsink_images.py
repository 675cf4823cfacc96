"""The two images of the lab's Bugsink (``rotate lab up --with bugsink``) as local processes:
``bugsink/bugsink`` (:mod:`rotate_lab.systems.bugsink_server`, run by Bugsink's own venv)
and ``rotate-lab/bugsink-rotator`` (:mod:`rotate_lab.systems.bugsink_rotator`).

Container paths — the Secret file, the data volume, ``ROTATE_VALUES_DIR`` — are translated
to the host directories of the pod's volumes, as for PostgreSQL.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rotate_lab.cluster.node.containers import Launch, UnknownImage, first_port, host_path
from rotate_lab.systems import bugsink


def server_launch(container: dict[str, Any], env: dict[str, str], *, pod_ip: str,
                  pod_dir: Path, mounts: dict[str, Path], base_env: dict[str, str]) -> Launch:
    try:
        interpreter = bugsink.python()
    except bugsink.NoBugsink as exc:
        raise UnknownImage(str(exc)) from None
    data = host_path(bugsink.DATA_PATH, mounts) or pod_dir / "rootfs" / "data"
    password_file = host_path(env.get("CREATE_SUPERUSER_PASSWORD_FILE", ""), mounts)
    full = {**base_env, **env, "BUGSINK_DATA": str(data), "POD_IP": pod_ip,
            "PORT": str(first_port(container) or 8000),
            "CREATE_SUPERUSER_PASSWORD_FILE": str(password_file or "")}
    script = Path(bugsink.__file__).with_name("bugsink_server.py")
    return Launch([str(interpreter), str(script)], full, None, "bugsink")


def rotator_launch(env: dict[str, str], *, lab_dir: Path, mounts: dict[str, Path],
                   base_env: dict[str, str]) -> Launch:
    values = host_path(env.get("ROTATE_VALUES_DIR", "/var/run/rotate"), mounts)
    full = {**base_env, **env, "ROTATE_VALUES_DIR": str(values or ""),
            "LAB_HOSTS_FILE": str(lab_dir / "hosts"),
            "LAB_FAULTS_FILE": str(lab_dir / "faults.json")}
    return Launch([sys.executable, "-m", "rotate_lab.systems.bugsink_rotator"], full, None,
                  "bugsink-rotator")
