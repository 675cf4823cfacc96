"""What a resume runs, and with which value (``Engine.resume``; cli.md "resume").

Invariants:

* A resume never regenerates a value: a value given on stdin must be the one the run was
  started with (its fingerprint in the journal), and once the backend holds it the value is
  re-read from there.
* Steps done stay done (their results are remembered for the steps that follow); a step
  left failed, interrupted or undone runs again from scratch.
* A wait that needs a fresh trigger gets one right before it (:func:`trigger_again`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rotate.core.errors import UsageError
from rotate.core.fingerprint import matches as fingerprint_matches
from rotate.core.secret import Secret
from rotate.engine import journal as journal_mod
from rotate.engine.journal import PREFLIGHT
from rotate.engine.model import PlannedStep

if TYPE_CHECKING:
    from rotate.engine.executor import Executor


def resume_steps(state: journal_mod.RunState, executor: Executor) -> None:
    """Run what is left of ``state``: an unfinished undo (rotate.engine.undo) is finished and
    the run ends failed again, as it would have; otherwise every step not done — and every
    prepared step that was undone — runs, undone ones from scratch (no earlier facts)."""
    from rotate.engine import undo as undo_mod
    from rotate.engine.kinds import kind_of

    undo_steps = [st for st in state.steps if st.step.index in state.undo_of]
    # the preflight record is not a step of the plan: it ran before the journal
    planned = [st for st in state.steps
               if st.step.kind != PREFLIGHT and st.step.index not in state.undo_of]
    for st in planned:
        if st.status == "done" and st.step.index not in state.undone:
            executor.run_of(st.step).remember(
                st.step, kind_of(st.step).result.from_json(st.data))
    executor.prior.update({st.step.index: st.data for st in [*planned, *undo_steps]
                           if st.status != "done"})
    pending = undo_mod.pending_undo(state)
    if pending:
        cause = state.undo_cause
        failed = next(st.step for st in planned if st.step.index == int(cause["index"]))
        executor.finish_undo(pending, failed, int(cause["exit_code"]), str(cause["what"]))
        return
    remaining = [st.step for st in planned
                 if st.status not in ("done", "skipped") or st.step.index in state.undone]
    executor.execute(trigger_again(state, remaining))


def trigger_again(state: journal_mod.RunState,
                   remaining: list[PlannedStep]) -> list[PlannedStep]:
    """``remaining`` with the trigger steps again right before the first wait that needs a
    fresh one (a kind's ``resume_after``), when the trigger is not among them already: ESO
    may have missed the first trigger (it was down or stalled), so the wait gets a fresh
    request and a fresh trigger time to prove.  The wait need not be the first step left:
    the consumers' prepared steps planned right before it (rotate.engine.plan) may be left
    too; the trigger then goes before them, so that they run beside the wait again."""
    from rotate.engine.kinds import kind_of

    for i, step in enumerate(remaining):
        again = kind_of(step).resume_after
        if again is not None:
            if any(s.kind == again for s in remaining[:i]):
                return remaining
            at = i
            while at > 0 and kind_of(remaining[at - 1]).prepares:
                at -= 1
            trigger = [st.step for st in state.steps if st.step.kind == again]
            return [*remaining[:at], *trigger, *remaining[at:]]
    return remaining


def supplied_again(state: journal_mod.RunState, value: Secret | None) -> Secret | None:
    """The value to resume with: the one given again on stdin, checked against the run's
    fingerprint; UsageError (exit 2) when it is missing but needed, or different."""
    stored = state.start.value_fingerprint
    if stored is None:
        if value is not None:
            raise UsageError(f"run {state.run_id} was not given a value on stdin; resume it "
                             "without --value-stdin")
        return None
    if value is None:
        from rotate.engine.kinds import find

        wrote = any(st.status == "done" and (kind := find(st.step)) is not None
                    and kind.writes_value for st in state.steps)
        if wrote:
            return None  # the value is in the backend: re-read from there
        raise UsageError(
            f"run {state.run_id} was given its value on stdin and failed before writing it; "
            "give the same value again",
            hint=f"rotate resume {state.run_id} --confirm --value-stdin")
    if not fingerprint_matches(value, stored):
        raise UsageError(f"the value given on stdin is not the one run {state.run_id} was "
                         "started with (fingerprint mismatch); nothing was changed")
    return value
