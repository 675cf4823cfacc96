"""The lab's process table: which pids are ours, whether they live, how they are stopped.

Invariants (lab.md "down stops every process the lab started, and only those"):

- A pid is touched only if it was recorded by the lab (``DIR/pids.json`` for the three
  detached parts, ``DIR/pods.json`` for pods) *and* ``/proc/<pid>/cmdline`` still looks like
  ours.  Pids are reused by the kernel; a stale file must never make ``down`` signal a
  stranger.  "Looks like ours" means the cmdline — or, for pods, the working directory or the
  environment — contains a marker recorded with the pid (the lab directory, or for a pod
  also the lab's runtime directory: a root lab's PostgreSQL names only that one,
  :mod:`rotate_lab.host.runtime_dir`).
- A zombie counts as dead.  When the caller is the parent (tests call ``up`` in-process),
  an exited child stays a zombie until reaped, and ``kill(pid, 0)`` still succeeds on it;
  so liveness is the state letter in ``/proc/<pid>/stat``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rotate_lab.host import priority


@dataclass(frozen=True)
class Recorded:
    """One recorded process: what it is, its pid, and a cmdline marker for the reuse guard
    (``also``: more markers, any of which will do)."""

    part: str
    pid: int
    marker: str
    also: tuple[str, ...] = ()


def cmdline(pid: int) -> str | None:
    """The process's argv joined by spaces, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


def _stat_after_comm(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after ``comm`` (the state first), or None if the
    process (or thread id) is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) S ..." — comm may hold spaces and parentheses; the state follows the last ")".
    return stat.rsplit(")", 1)[-1].split() if ")" in stat else None


def _state(pid: int) -> str | None:
    fields = _stat_after_comm(pid)
    return fields[0] if fields else None


def niceness(pid: int) -> int | None:
    """The niceness of the thread ``pid`` (a process's main thread, or a thread id from
    ``/proc/<pid>/task``), or None if it is gone (rotate_lab.host.priority)."""
    fields = _stat_after_comm(pid)
    return int(fields[16]) if fields else None


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie.

    No ``waitpid`` here: the pid may belong to a Popen elsewhere in this process, whose
    exit status we must not steal.  A zombie is dead for our purposes.
    """
    state = _state(pid)
    return state is not None and state not in ("Z", "X")


def ours(rec: Recorded) -> bool:
    """Alive and still the program we recorded (pid-reuse guard)."""
    if not alive(rec.pid):
        return False
    markers = (rec.marker, *rec.also)
    line = cmdline(rec.pid)
    if line is not None and any(m in line for m in markers):
        return True
    # Pods run programs whose argv need not name the lab, and redis-server even rewrites its
    # argv and environment block (process title); but the kubelet starts every pod in its
    # directory under the lab's, and gives it the lab's paths in its environment.
    try:
        cwd = os.readlink(f"/proc/{rec.pid}/cwd")
        if any(m in cwd for m in markers):
            return True
    except OSError:
        pass
    try:
        environ = Path(f"/proc/{rec.pid}/environ").read_bytes()
    except OSError:
        return False
    return any(m.encode() in environ for m in markers)


def spawn(argv: Sequence[str], *, log: Path, cwd: Path | None = None,
          env: dict[str, str] | None = None, nice: int = 0) -> int:
    """Start a detached process (own session, stdin closed, output appended to ``log``),
    process and session at niceness ``nice`` (:mod:`rotate_lab.host.priority`).

    Detached so that the lab outlives the ``rotate lab up`` that started it, and so that a
    Ctrl-C in the user's terminal is not delivered to the lab's process group.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    out: IO[bytes]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            priority.wrapped(argv, nice), stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True, close_fds=True,
        )
    priority.set_session(proc.pid, nice)
    return proc.pid


def signal_pid(rec: Recorded, sig: int) -> bool:
    """Send ``sig`` if the pid is still ours; True if sent."""
    if not ours(rec):
        return False
    try:
        os.kill(rec.pid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids: Iterable[int], deadline: float, poll: float = 0.05) -> list[int]:
    """Wait until none of ``pids`` is alive or the monotonic ``deadline`` passes.

    Returns the pids still alive.  Polling is the only option for non-children: Linux offers
    pidfd_open, but Python exposes waiting on it only for children.
    """
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(poll)
        left = [p for p in left if alive(p)]
    return left


def stop(recs: Sequence[Recorded], timeout: float) -> list[str]:
    """SIGTERM every recorded process that is still ours, wait, then SIGKILL leftovers.

    Returns one line per process acted on (for ``rotate lab down``'s output).
    """
    lines: list[str] = []
    sent: list[Recorded] = []
    for rec in recs:
        # A SIGSTOPped process (fault bao-down) would hold a SIGTERM pending forever.
        if signal_pid(rec, signal.SIGCONT) and signal_pid(rec, signal.SIGTERM):
            sent.append(rec)
    left = set(wait_gone([r.pid for r in sent], time.monotonic() + timeout))
    for rec in sent:
        if rec.pid in left and signal_pid(rec, signal.SIGKILL):
            lines.append(f"killed {rec.part} (pid {rec.pid}): no exit {timeout:.0f}s after SIGTERM")
        else:
            lines.append(f"stopped {rec.part} (pid {rec.pid})")
    wait_gone(list(left), time.monotonic() + 2.0)
    return lines


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: Any, mode: int = 0o644) -> None:
    """Atomic write (readers never see half a file) with the given permission bits."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
