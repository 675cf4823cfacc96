"""``rotate lab fault``: switching the lab's faults on and off (docs/lab.md "Faults").

Every lab process re-reads ``DIR/faults.json`` (:class:`rotate_lab.faults.Faults`), so a
switch is a rewrite of that file; ``bao-down`` alone acts here, by SIGSTOP/SIGCONT of
OpenBao's recorded pid.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from rotate.core.errors import UsageError
from rotate_lab.control.labdir import LabDir, running
from rotate_lab.control.lifecycle import LabFailed
from rotate_lab.faults import FAULT_KINDS, Faults
from rotate_lab.host import processes

TARGETED_FAULTS = ("crashloop", "readyz-fail")
#: faults that hit everything, or only the targets named (``eso-stall NS/NAME``: that
#: ExternalSecret alone is never synced)
OPTIONALLY_TARGETED = ("eso-stall",)
#: faults whose target, a namespace (``*``: cluster-wide), is optional: everywhere without
NAMESPACE_FAULTS = ("list-forbidden",)
#: faults whose target, a rotator phase (set, test, finish, undo-set, …), is optional: every
#: phase without one
PHASE_FAULTS = ("rotator-fail", "rotator-hang")
#: faults whose target is optional
MAY_TARGET = (*OPTIONALLY_TARGETED, *PHASE_FAULTS, *NAMESPACE_FAULTS)


def fault(dir: str | Path, kind: str | None, target: str | None = None,
          clear: bool = False) -> dict[str, Any]:
    """Switch a lab fault on (or off with ``clear``); return the faults now active.

    Every lab process re-reads ``DIR/faults.json``; ``bao-down`` alone acts here, by
    SIGSTOP/SIGCONT of OpenBao's pid — a hung server, not a refused connection, which is the
    harder case for a client (it must time out).
    """
    d = LabDir(Path(dir).expanduser().resolve())
    if kind is not None and kind not in FAULT_KINDS:
        raise UsageError(f"unknown fault {kind!r}; one of: {', '.join(FAULT_KINDS)}")
    if not clear and kind is None:
        raise UsageError("name a fault (or --clear)")
    if not clear and kind in TARGETED_FAULTS and not target:
        raise UsageError(f"fault {kind} needs a target: the Deployment (e.g. cart)")
    if kind is not None and kind not in (*TARGETED_FAULTS, *MAY_TARGET) and target:
        raise UsageError(f"fault {kind} takes no target")
    if kind in OPTIONALLY_TARGETED and target and target.count("/") != 1:
        raise UsageError(f"fault {kind} takes no target, or one ExternalSecret as NS/NAME "
                         f"(not {target!r})")
    live, _ = running(d)
    if not live:
        raise UsageError(f"no lab running in {d.root}", hint=f"rotate lab up --dir {d.root}")
    path = d / "faults.json"
    current = processes.read_json(path)
    faults: dict[str, Any] = current if isinstance(current, dict) else {}
    if clear:
        kinds = [kind] if kind is not None else list(faults)
        for k in kinds:
            if k in (*TARGETED_FAULTS, *MAY_TARGET) and target:
                rest = [t for t in faults.get(k) or [] if t != target]
                faults[k] = rest
            else:
                faults.pop(k, None)
            if not faults.get(k):
                faults.pop(k, None)
        if "bao-down" in kinds:
            _signal_bao(d, signal.SIGCONT)
    else:
        assert kind is not None
        if kind in TARGETED_FAULTS or (kind in MAY_TARGET and target):
            assert target is not None
            faults[kind] = sorted({*(faults.get(kind) or []), target})
        else:
            faults[kind] = True
        if kind == "bao-down":
            _signal_bao(d, signal.SIGSTOP)
    Faults.write(path, faults)
    return faults


def _signal_bao(d: LabDir, sig: int) -> None:
    for rec in d.recorded():
        if rec.part == "openbao" and processes.signal_pid(rec, sig):
            return
    if sig == signal.SIGSTOP:
        raise LabFailed("OpenBao is not running; cannot stop it answering")
