"""A credential's runs as a sequence: the one that is left unfinished, and the ones that came
after a given run — so that a new run does not start on top of a half-rotated chain, and a
resume does not fight a run that came after it.

Why: a run that failed or was interrupted after it changed something leaves the chain
half-rotated on purpose, with ``resume`` and ``rollback`` as the ways out (chain.md).  A
second rotation started on top of it writes another value, and the first run's resume
would then continue with a value the chain no longer holds.  So:

* ``rotate CREDENTIAL`` refuses (a failed preflight check, ``runs.unfinished``: exit 3,
  nothing changed) while the credential's latest run changed something and did not finish —
  unless ``--force``, which says in the plan that the run is left as it is;
* ``rotate resume RUN`` refuses (exit 3) once a later run of the credential changed
  something.

Invariants: the runs are read from the state directory *and* the cluster (rotate.engine.
runstore), so a run journaled on another machine or in a pod blocks here too — with the
API server unreachable only the state directory's runs can be read (preflight cannot pass
then anyway: it needs the cluster); a run that
changed nothing (it stopped before its backend write began) never blocks; a journal that
cannot be read is skipped, as ``rotate runs`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from rotate.core.findings import Check
from rotate.engine.journal import PREFLIGHT, RunState
from rotate.engine.kinds import find


class RunSource(Protocol):
    """Where the runs are read from (rotate.engine.runstore.RunStore)."""

    @property
    def where(self) -> str: ...

    def load_runs(self) -> Iterator[RunState]: ...

#: a run in one of these states may have left the chain half-rotated
OPEN = ("running", "failed", "interrupted", "rollback-failed")

CHECK = "runs.unfinished"


def changed_something(state: RunState) -> bool:
    """Whether the run began a step that changes the chain: a rotation, the step that writes
    its value to the backend (nothing before it changes anything); a rollback, any step."""
    if state.operation == "rotate":
        return any(s.status != "pending" and (kind := find(s.step)) is not None
                   and kind.writes_value for s in state.steps)
    return any(s.step.kind != PREFLIGHT and s.status != "pending" for s in state.steps)


def _runs_of(runs: RunSource, credential: str) -> Iterator[RunState]:
    """The credential's runs, newest first, read as asked (unreadable journals skipped): its
    own and the runs of several credentials it was one of."""
    return (s for s in runs.load_runs() if credential in s.start.credentials)


def latest_unfinished(runs: RunSource, credential: str) -> RunState | None:
    """The credential's latest run that changed something, when it did not finish."""
    for state in _runs_of(runs, credential):
        if changed_something(state):
            return state if state.status in OPEN else None
    return None


def later_runs(runs: RunSource, orig: RunState) -> list[RunState]:
    """Runs of ``orig``'s credential (of any of a run of several's) started after it that
    changed something, newest first.
    Reading stops at ``orig`` itself: the runs listed after it are older (a resume or a
    rollback need not read the journal of every run the state directory ever kept)."""
    later: list[RunState] = []
    mine = set(orig.start.credentials)
    for state in runs.load_runs():
        if state.run_id == orig.run_id:
            break
        if mine & set(state.start.credentials) and state.started_at > orig.started_at \
                and changed_something(state):
            later.append(state)
    return later


def describe(state: RunState) -> str:
    """``RUN (rotate, interrupted at step 17 consumer.wait)`` — from its journal."""
    stopped = next((s for s in state.steps if s.status in ("failed", "interrupted", "running")),
                   None)
    where = f" at step {stopped.step.index} {stopped.step.kind}" if stopped else ""
    return f"{state.run_id} ({state.operation}, {state.status}{where})"


def unfinished_check(runs: RunSource, credential: str, *, force: bool) -> Check:
    """The preflight check ``runs.unfinished``: fatal unless ``force``."""
    open_run = latest_unfinished(runs, credential)
    if open_run is None:
        return Check(CHECK, True, f"no unfinished run of {credential} in {runs.where}")
    what = describe(open_run)
    if force:
        return Check(CHECK, True, f"run {what} is unfinished; --force: starting anyway, and "
                     "that run can then no longer be resumed")
    verb = "resume it" if open_run.operation == "rollback" else "resume it or roll it back"
    return Check(CHECK, False,
                 f"run {what} is unfinished: {verb} first (`rotate resume "
                 f"{open_run.run_id} --confirm`"
                 + ("" if open_run.operation == "rollback"
                    else f", `rotate rollback {open_run.run_id} --confirm`")
                 + "), or start anyway with --force")
