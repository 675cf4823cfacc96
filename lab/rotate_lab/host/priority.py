"""The lab's CPU priority: ``rotate lab up --nice N`` runs every lab process at niceness N.

Why: the lab is a cluster emulated on the operator's own machine.  Every part and every pod
is a session of its own (``start_new_session``), as a pod is a cgroup of its own on a node,
and Linux's autogroup scheduler (``kernel.sched_autogroup_enabled``) gives each session an
equal share of the CPUs.  A command the operator runs beside the lab (``rotate``,
``kubectl``, ``bao``) is then one session among dozens: under the benchmark's load a start-up
takes several times as long as alone (docs/performance.md).  On a real cluster those commands
run on CPUs of their own.  At niceness N, a lab session weighs less than the operator's
(the kernel's weights: 1024 at 0, 110 at 10, 15 at 19), so the operator's command gets a
core when it wants one and the lab gets every cycle the command leaves.

Invariants:

- N = 0, the default, changes nothing: no wrapper, no write.
- A niceness is only ever raised, which needs no privilege.
- Both places the scheduler reads are set: the process's own niceness (inherited by its
  threads and children; it is what counts where autogroup is off) through ``nice(1)`` before
  the program starts, so no thread of it escapes; and its session's autogroup, which a new
  session does not inherit, so whoever creates a session (:mod:`rotate_lab.host.processes`, the
  kubelet for each pod) sets it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

#: what ``--nice`` accepts: raising only (a negative niceness needs privilege)
MAX_NICE = 19


def check(nice: int) -> int:
    """``nice`` if it is 0…19, else ValueError with the range."""
    if not 0 <= nice <= MAX_NICE:
        raise ValueError(f"--nice {nice}: must be 0-{MAX_NICE} (the lab's processes may only "
                         "be made to yield)")
    return nice


def wrapped(argv: Sequence[str], nice: int) -> list[str]:
    """``argv`` started at niceness ``nice`` (``nice -n N argv``; ``exec`` keeps the pid)."""
    return ["nice", "-n", str(nice), *argv] if nice else list(argv)


def current() -> int:
    """This thread's niceness (Linux keeps one per thread; a new thread inherits it)."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def set_session(pid: int, nice: int) -> None:
    """Give the session ``pid`` leads the autogroup niceness ``nice``; a no-op for 0 or on a
    kernel without autogroup (there the process's own niceness already counts)."""
    if nice <= 0:
        return
    with contextlib.suppress(OSError):  # no autogroup here, or the process is gone
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")


def session_niceness(pid: int) -> int | None:
    """The autogroup niceness of ``pid``'s session, or None where there is no autogroup."""
    try:
        text = Path(f"/proc/{pid}/autogroup").read_text()
    except OSError:
        return None
    return int(text.split("nice")[-1])

