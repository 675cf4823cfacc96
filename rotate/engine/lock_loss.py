"""What a run says when its lock was taken from it (exit 5, LockLost).

A run's Lease can be taken over (``--take-over-lock``) once its holder stopped renewing it —
a process frozen, suspended or cut off longer than the lease's duration.  When such a run
goes on, it must not act any further: the new holder may be acting on the same objects.  So
the executor stops it at the next step boundary (rotate.engine.lock: ``still_held``) and:

* undoes nothing, and starts no further step;
* when the new holder is a process resuming *this* run, journals nothing more — not even
  the end of the step it was in: the journal is that process's now — and exits 5 saying so.
  Told by the journal itself (:func:`taken_by_this_run`): its last ``run.resume`` names
  another process — the Lease cannot tell, as that resume holds it under the same identity
  (``user@host/<run id>``) and may have finished and deleted it already;
* otherwise ends the run ``failed`` with exit 5 and a message naming the Lease, its new
  holder, the state of the chain and the next commands: wait for that run, then resume or
  roll back this one.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from rotate.core.errors import JournalUnreadable, LockLost
from rotate.engine.journal_lines import read_records
from rotate.engine.lock import Lease, Locks
from rotate.engine.model import PlannedStep


def lost(lease: Lease | Locks) -> LockLost:
    """The LockLost naming the lease taken from us and who holds it now."""
    taken = lease.lost_lease if isinstance(lease, Locks) else lease
    taken = taken or (lease.credential if isinstance(lease, Locks) else lease)
    where = f"{taken.namespace}/{taken.name}"
    now = (f"is held by {taken.taken_by} now (taken over with --take-over-lock)"
           if taken.taken_by else "was deleted")
    return LockLost(f"lost its lock: Lease {where} {now}", lease=where,
                    taken_by=taken.taken_by)


def holder_run(error: LockLost) -> str:
    """The run id of the new holder ("" when the lease was deleted)."""
    return error.taken_by.rpartition("/")[2] if error.taken_by else ""


def taken_by_this_run(error: LockLost, journal: Path, run_id: str) -> bool:
    """Whether the lock went to a process resuming this run: the Lease's new holder is this
    run, or the journal's latest ``run.start``/``run.resume`` was written by another
    process than this one."""
    if holder_run(error) == run_id:
        return True
    try:
        records = read_records(journal, run_id)
    except JournalUnreadable:
        return False
    starts = [r for r in records if r.get("event") in ("run.start", "run.resume")]
    process = (starts[-1].get("data") or {}).get("process") if starts else None
    return isinstance(process, dict) and process != {"host": socket.gethostname(),
                                                     "pid": os.getpid()}


def resumed_elsewhere(error: LockLost, run_id: str) -> LockLost:
    """The run's lock was taken over by a process resuming this very run."""
    return LockLost(
        f"run {run_id} {error.message}; a process resuming this same run took it over, and "
        "this process stopped and changed nothing more",
        hint=f"follow that process's run with `rotate show {run_id}`; there is nothing to "
             "do here", lease=error.lease, taken_by=error.taken_by)


def explain(error: LockLost, step: PlannedStep, state: str, run_id: str, resume: str,
            rollback: str) -> str:
    """The run report's message: what happened, the state now, the next commands
    (``rollback`` "" for a rollback run: it is resumed, not rolled back)."""
    head = (f"Run {run_id} {error.message}; it stopped at step {step.index} {step.kind} on "
            f"{step.target} and changed nothing more. Nothing it prepared was undone: "
            f"whoever holds the lock may be acting on the same objects. State now: {state}. ")
    other = holder_run(error)
    ways = f"`{resume}`" + (f" or undo it with `{rollback}`" if rollback else "")
    when = (f"When run {other} has finished (`rotate show {other}`), continue this run with "
            if other else "Continue this run with ")
    return head + f"{when}{ways} (add the same --chain/--state-dir options as this run)."
