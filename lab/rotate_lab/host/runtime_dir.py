"""The runtime directory of a root lab: where a server that runs as another user keeps its files.

Why: root may not run PostgreSQL, so a lab started by root runs it as the unprivileged
``postgres`` user (:mod:`rotate_lab.systems.postgres_entrypoint`), and that user must search
every parent of its data directory.  The lab directory is wherever its user put it — under a
home of mode 0700, in a ``mktemp -d`` — and the lab never widens the permissions of a
directory of its user.  Such a server's files (its volume, its socket directory) live in a
directory of the lab's own outside the lab directory instead, as a real node keeps its
volumes under ``/var/lib/kubelet`` whatever directory ``kubectl`` ran from.

Invariants:

- Only a lab run by root has one (:func:`needed`): anyone else runs PostgreSQL as themself,
  in the lab directory.
- ``up`` makes it with :func:`create`: ``/tmp/rotate-lab-XXXXXXXX`` (``mkdtemp``: a new name
  no one else can have taken), owned by root, mode 0711 — a server's user can pass through
  to what is its own inside, nobody may list it.  Inside, each server's directories belong
  to its user, mode 0700 (the entrypoint hands them over).
- Its path is recorded in ``DIR/runtime.json`` at once; the kubelet learns it through
  ``DIR/cluster.json``, and ``down`` removes it after every process has stopped.
- :func:`remove` deletes only a directory that looks like one :func:`create` made (directly
  under :data:`BASE`, named ``rotate-lab-*``, a real directory owned by the caller) — never
  whatever a stale or edited ``runtime.json`` names.
- Nothing in it survives ``down``: the next ``up`` initialises PostgreSQL again, from
  OpenBao's current values (what a new volume would get).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from rotate_lab.host import processes

#: world-writable with the sticky bit: another user can neither take nor remove our name
BASE = Path("/tmp")
PREFIX = "rotate-lab-"
RECORD = "runtime.json"


def needed() -> bool:
    """True when the lab runs as root: its PostgreSQL then runs as another user."""
    return os.geteuid() == 0


def create(lab_root: Path) -> Path:
    """Make a new runtime directory for the lab in ``lab_root`` and record it there.
    Raises OSError when :data:`BASE` does not take it."""
    path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=BASE))
    os.chmod(path, 0o711)
    processes.write_json(lab_root / RECORD, {"dir": str(path)})
    return path


def recorded(lab_root: Path) -> Path | None:
    """The runtime directory ``lab_root`` records, if it still looks like one we made."""
    data = processes.read_json(lab_root / RECORD)
    value = data.get("dir") if isinstance(data, dict) else None
    if not isinstance(value, str):
        return None
    path = Path(value)
    return path if _made_by_create(path) else None


def _made_by_create(path: Path) -> bool:
    if path.parent != BASE or not path.name.startswith(PREFIX):
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def remove(lab_root: Path) -> list[str]:
    """Delete the recorded runtime directory and its record (idempotent); the line(s) for
    ``down``'s output.  Call only once no process of the lab runs."""
    path = recorded(lab_root)
    lines: list[str] = []
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
        lines.append(f"could not remove {path}: remove it by hand" if os.path.lexists(path)
                     else f"removed {path}")
    (lab_root / RECORD).unlink(missing_ok=True)
    return lines
