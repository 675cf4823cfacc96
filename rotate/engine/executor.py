"""Runs a plan's steps in order, journaling every transition; derives the run report.

Per step: ``step.start`` is journaled (flushed, fsynced) → its kind (rotate.engine.kinds)
observes, acts and proves → ``step.done``.  A failure journals ``step.failed`` and ends the
run with the kind's exit code (cli.md) and one paragraph: what failed, what state the chain
is in now, and the exact resume and rollback commands.  Cancellation (SIGINT/SIGTERM
through the CancelToken) is checked between steps and inside every wait; the interrupted
step is journaled as such and the run ends ``interrupted`` (exit 130), resumable.

A TemporaryError (connection refused, 5xx, 429, a 409 on a stale read) does not fail a step:
it is attempted again, with back-off, until the step's deadline (``wait_for``).  Safe because
every kind is idempotent: it first looks at what earlier attempts recorded (``StepIO.prior``,
as resume does) and observes what is done.  A step's own WaitTimeout is a PermanentError.

When a step fails, what the run prepared ahead of that step's stage (restart strategy:
documents and consumer rollouts started before the provider switched) is undone first, by
journaled steps (rotate.engine.undo); the run ends with the failed kind's exit code.

Steps run in groups (rotate.engine.grouping): parallel steps with bounded parallelism, each
consumer's steps of a lane group in plan order on one thread, the consumers' prepared steps
beside sync.wait on a thread of their own, and in a run of several credentials each
credential's chain (stages ①–③) on a thread of its own.  Once a step of a group fails, no
further step of it starts; those running finish, and the run ends with the lowest-numbered
failed step (an interruption first).  Beside sync.wait both sides finish before the next
step (the provider's switch), and a failed wait starts no further prepared step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rotate.core.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Interrupted,
    RotateError,
    StepFailed,
)
from rotate.core.observation import observed_by
from rotate.core.refs import ObjectRef
from rotate.core.waiting import wait_for
from rotate.engine import grouping, lock_loss
from rotate.engine import journal as journal_mod
from rotate.engine import undo as undo_mod
from rotate.engine.chain_state import describe_members, describe_state
from rotate.engine.events import RunEvents
from rotate.engine.kinds import kind_of
from rotate.engine.kinds.base import Outcome, Run, StepData, StepIO
from rotate.engine.lock import Lease, Locks
from rotate.engine.model import Observer, PlannedStep, StepRecord
from rotate.engine.next_commands import resume_command, rollback_command
from rotate.engine.notify import RunNotifier
from rotate.engine.report import report_from as report_from  # where callers find it


class _StepError(Exception):
    def __init__(self, step: PlannedStep, error: BaseException) -> None:
        super().__init__(step.kind)
        self.step = step
        self.error = error


def _safe_message(exc: BaseException) -> str:
    if isinstance(exc, RotateError):
        return exc.message
    # Our own bug: the type is enough to find it; its text could hold anything.
    return f"internal error ({type(exc).__name__})"


class Executor:
    def __init__(
        self, run: Run, observer: Observer, *, lease: Lease | Locks | None = None,
        prior: dict[int, dict[str, Any]] | None = None,
        uids: Mapping[ObjectRef, str] | None = None,
        members: Mapping[str, Run] | None = None,
    ) -> None:
        """``uids``: of objects already read (preflight), so their events need no GET.
        ``members``: a run of several credentials, each one's :class:`Run` (the steps
        naming a credential act through it; ``run`` is the first of them, whose journal,
        cancel token and settings they all share — rotate.engine.merge)."""
        self.run = run
        self.members = dict(members or {})
        self.observer = observer
        self.lease = lease
        self.prior = prior or {}
        self.events = RunEvents(run, uids, run_of=self.run_of)
        #: webhooks and Pushgateway metrics (rotate.engine.notify); warnings on the observer
        self.notices = RunNotifier(run, observer.note)

    def run_of(self, step: PlannedStep) -> Run:
        """The run a step acts through: its credential's in a run of several, else the one."""
        return self.members.get(step.credential, self.run) if step.credential else self.run

    def _state_words(self, state: journal_mod.RunState) -> str:
        return describe_members(self.members, state) if self.members \
            else describe_state(self.run, state)

    # ------------------------------------------------------------------ one step

    def _run_step(self, step: PlannedStep) -> None:
        run = self.run
        journal = run.journal
        run.cancel.check()
        self._check_lock(step)
        journal.append("step.start", step=step, data={})
        self.observer.step_started(step)
        started = time.monotonic()
        io = StepIO(step, journal, dict(self.prior.get(step.index, {})))
        try:
            outcome = self._attempts(step, io)
        except Interrupted as exc:
            seconds = round(time.monotonic() - started, 3)
            journal.append("step.interrupted", step=step,
                           data={"detail": f"interrupted ({exc.message}); runs again on resume",
                                 "seconds": seconds})
            self._finished(step, "pending", "interrupted", seconds)
            raise _StepError(step, exc) from None
        except Exception as exc:
            seconds = round(time.monotonic() - started, 3)
            message = _safe_message(exc)
            self._check_lock(step, ending=True)
            journal.append("step.failed", step=step, data={"detail": message, "seconds": seconds})
            self.events.step_failed(step, message)
            self._finished(step, "failed", message, seconds)
            raise _StepError(step, exc) from None
        seconds = round(time.monotonic() - started, 3)
        self._check_lock(step, ending=True)
        self.run_of(step).remember(step, outcome.data)
        journal.append("step.done", step=step, data={**outcome.data.to_json(),
                                                     "detail": outcome.detail,
                                                     "seconds": seconds})
        self.events.step_done(step, outcome.detail)
        self._finished(step, "done", outcome.detail, seconds)

    def _check_lock(self, step: PlannedStep, *, ending: bool = False) -> None:
        """Before a step starts: the run still holds its locks, or it stops (LockLost). Before
        a step's end is journaled (``ending``): the same when a process resuming this very
        run took the lock — the journal is that process's now; taken by another run, what
        the step did is journaled and the run stops at the next boundary (lock_loss.py)."""
        if self.lease is None or self.lease.still_held():
            return
        error = lock_loss.lost(self.lease)
        if ending and not lock_loss.taken_by_this_run(error, self.run.journal.path,
                                                      self.run.run_id):
            return
        raise _StepError(step, error) from None

    def _attempts(self, step: PlannedStep, io: StepIO) -> Outcome[StepData]:
        """Attempt the step, again after a TemporaryError, until the step deadline.  What its
        waits observe goes to the observer meanwhile (rotate.core.observation)."""
        kind = kind_of(step)()
        run = self.run_of(step)
        with observed_by(lambda seen: self.observer.step_observed(step, seen)):
            return wait_for(lambda: kind.execute(run, io), deadline=self.run.deadline(),
                            what=f"{step.kind} {step.target}", cancel=self.run.cancel)

    def _finished(self, step: PlannedStep, status: Any, detail: str, seconds: float) -> None:
        record = StepRecord(step.index, step.stage, step.kind, step.target, status,
                            seconds=seconds, detail=detail)
        self.observer.step_finished(step, record)
        self.notices.step_finished(step, record)

    def _run_group(self, group: Sequence[PlannedStep], stop: threading.Event | None = None,
                   lanes: Sequence[Sequence[PlannedStep]] | None = None) -> None:
        """``group``'s steps by ``lanes`` (grouping.lanes), each in order; none starts once
        ``stop`` is set (a failed step of the group, or the wait it runs beside failed)."""
        stop = threading.Event() if stop is None else stop
        if lanes is None and (len(group) == 1 or self.run.max_parallel <= 1):
            self._run_lane(group, stop)
            return
        units = grouping.lanes(group) if lanes is None else lanes
        errors: list[_StepError] = []
        with ThreadPoolExecutor(max_workers=self.run.max_parallel if lanes is None
                                else len(units), thread_name_prefix="rotate-step") as pool:
            for fut in [pool.submit(self._run_lane, lane, stop) for lane in units]:
                _gather(errors, fut.exception())
        if errors:
            raise _first(errors)

    def _run_lane(self, steps: Sequence[PlannedStep], stop: threading.Event) -> None:
        """One consumer's steps of a group, in order, until one fails or ``stop`` is set."""
        for step in steps:
            if stop.is_set():
                return
            try:
                self._run_step(step)
            except BaseException:
                stop.set()
                raise

    # ------------------------------------------------------------------ the run

    def _run_steps(self, steps: Sequence[PlannedStep]) -> None:
        """Run ``steps`` in order, consecutive parallel steps of one kind (or one lane) as a
        group."""
        if steps:
            # Indexes are the plan's; on resume the first steps are already done.
            self.observer.set_total(steps[-1].index)
        groups = grouping.groups_of(steps)
        i = 0
        while i < len(groups):
            side = grouping.beside(groups, i)
            chain = 0 if side else grouping.chain_run(groups, i)
            if side:
                waits = grouping.waits(groups, i + side)
                self._run_beside(groups[i:i + side],
                                 [group[0] for group in groups[i + side:i + side + waits]])
                i += side + waits
            elif chain and self.run.max_parallel > 1 and grouping.independent(
                    groups[i:i + chain], lambda step: self.run_of(step).credential.providers):
                chained = groups[i:i + chain]
                self._run_group([s for g in chained for s in g],
                                lanes=grouping.by_credential(chained))
                i += chain
            else:
                self._run_group(groups[i])
                i += 1

    def _run_beside(self, side: Sequence[Sequence[PlannedStep]],
                    waits: Sequence[PlannedStep]) -> None:
        """The ``side`` groups (the prepared steps), in order, on a thread of their own while
        ``waits`` (sync.wait: one per credential of the run) run one after the other on this
        one: the consumers are prepared in the time ESO takes to react.  Both finish before
        the run goes on; a failed wait starts no further wait or prepared step (those
        running finish); a failure of either is raised as a group's would be (an
        interruption first, else the lowest-numbered step)."""
        errors: list[_StepError] = []
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rotate-beside") as pool:
            prepared = pool.submit(self._run_groups, side, stop)
            for wait in waits:
                try:
                    self._run_step(wait)
                except _StepError as err:
                    errors.append(err)
                    stop.set()
                    break
            _gather(errors, prepared.exception())
        if errors:
            raise _first(errors)

    def _run_groups(self, groups: Sequence[Sequence[PlannedStep]],
                    stop: threading.Event) -> None:
        for group in groups:
            if stop.is_set():
                return
            self._run_group(group, stop)

    def execute(self, steps: Sequence[PlannedStep]) -> None:
        """Run ``steps`` (already filtered to what is left to do); journal ``run.end``."""
        run = self.run
        self.events.expect(steps)
        self.notices.run_started()
        try:
            self._run_steps(steps)
        except _StepError as err:
            if isinstance(err.error, Interrupted):
                self._end_interrupted(err.step)
                return
            if self.lease is not None and self.lease.lost:
                self._end_lock_lost(err.step)
                return
            self._fail(err)
            return
        except Interrupted:
            state = journal_mod.load_file(run.journal.path, run.run_id)
            self._end("interrupted", EXIT_INTERRUPTED,
                      f"Interrupted between steps. State now: {self._state_words(state)}. "
                      + self._next_commands())
            return
        self._end("succeeded", EXIT_OK)

    def _end(self, status: str, exit_code: int, message: str | None = None) -> None:
        """The run's end events (best effort), then ``run.end`` with their counts."""
        self.notices.run_end(status, exit_code, message or "")  # delivered beside the events
        self.events.run_end(status, message or "")
        data: dict[str, Any] = {"status": status, "exit_code": exit_code}
        if message is not None:
            data["message"] = message
        data["events"] = self.events.counts.to_json()
        notified = self.notices.flush()
        if notified is not None:
            data["notify"] = notified
        self.run.journal.append("run.end", data=data)

    def _end_lock_lost(self, step: PlannedStep) -> None:
        """Another process holds the run's lock now: nothing more is changed, nothing is
        undone (the holder may be acting on the same objects); exit 5 (lock_loss.py)."""
        assert self.lease is not None
        run = self.run
        error = lock_loss.lost(self.lease)
        if lock_loss.taken_by_this_run(error, run.journal.path, run.run_id):
            raise lock_loss.resumed_elsewhere(error, run.run_id)  # its journal is theirs now
        state = journal_mod.load_file(run.journal.path, run.run_id)
        rollback = rollback_command(run.run_id) if run.start.operation == "rotate" else ""
        self._end("failed" if run.start.operation == "rotate" else "rollback-failed",
                  error.exit_code, lock_loss.explain(error, step, self._state_words(state),
                                                     run.run_id, resume_command(run.run_id),
                                                     rollback))

    def _end_interrupted(self, step: PlannedStep) -> None:
        self._end("interrupted", EXIT_INTERRUPTED, self._explain(step, "was interrupted"))

    def _fail(self, err: _StepError) -> None:
        """Undo what was prepared ahead of the failed step, then journal the failure."""
        run = self.run
        code = kind_of(err.step).exit_code if isinstance(err.error, RotateError) \
            else EXIT_INTERNAL
        if isinstance(err.error, StepFailed) and err.error.own_exit_code is not None:
            code = err.error.own_exit_code
        what = f"failed: {_safe_message(err.error)}"
        state = journal_mod.load_file(run.journal.path, run.run_id)
        plan = undo_mod.plan_undo(state, err.step)
        if plan.steps:
            cause = {"index": err.step.index, "kind": err.step.kind,
                     "target": err.step.target, "exit_code": code, "what": what}
            run.journal.append("run.undo", data=plan.record(cause))
            for index, seed in plan.seeds.items():
                self.prior[index] = {"undoes": seed}
        self.finish_undo(list(plan.steps), err.step, code, what,
                         next_step=err.error.next_step
                         if isinstance(err.error, StepFailed) else None)

    def finish_undo(self, steps: Sequence[PlannedStep], failed: PlannedStep, code: int,
                    what: str, *, next_step: str | None = None) -> None:
        """Run the undo ``steps`` of ``failed`` (maybe none), then journal the run's end:
        ``failed`` with ``code`` — or interrupted, resumable, when the undo was."""
        run = self.run
        self.notices.run_started()
        undo_error: _StepError | None = None
        try:
            self._run_steps(steps)
        except _StepError as exc:
            if isinstance(exc.error, Interrupted):
                self._end_interrupted(exc.step)
                return
            undo_error = exc
        except Interrupted:
            self._end_interrupted(failed)
            return
        self._end("failed" if run.start.operation == "rotate" else "rollback-failed", code,
                  self._explain(failed, what, undo_error, next_step))

    def _explain(self, step: PlannedStep, what: str,
                 undo_error: _StepError | None = None, next_step: str | None = None) -> str:
        run = self.run
        state = journal_mod.load_file(run.journal.path, run.run_id)
        head = f"Step {step.index} {step.kind} on {step.target} {what}. "
        if undo_error is not None:
            bad = undo_error.step
            head += (f"Undoing what was prepared ahead of it failed at step {bad.index} "
                     f"{bad.kind} on {bad.target}: {_safe_message(undo_error.error)}. ")
        undone = (undo_error is None and bool(state.undo_round)
                  and state.undo_cause.get("index") == step.index)
        if undone:
            head += (f"What was prepared ahead of it was undone: {undo_mod.summary(state)}; "
                     "no consumer uses the new value. ")
        head += f"State now: {self._state_words(state)}. "
        if undone:
            return head + (f"Fix what failed, then resume with `{resume_command(run.run_id)}` "
                           f"(it prepares the consumers again and retries step {step.index}) "
                           f"or roll back with `{rollback_command(run.run_id)}` (add the same "
                           "--chain/--state-dir options as this run).")
        if undo_error is not None:
            return head + (f"Finish the undo with `{resume_command(run.run_id)}` or roll back "
                           f"with `{rollback_command(run.run_id)}` (add the same "
                           "--chain/--state-dir options as this run).")
        return head + (next_step or self._next_commands())

    def _next_commands(self) -> str:
        """The exact commands that continue or undo the run (a rollback: resume only)."""
        run = self.run
        if run.start.operation == "rollback":
            return (f"Resume the rollback with `{resume_command(run.run_id)}` "
                    "(add the same --chain/--state-dir options as this run).")
        return (f"Resume with `{resume_command(run.run_id)}` or roll back with "
                f"`{rollback_command(run.run_id)}` (add the same --chain/--state-dir "
                "options as this run).")


def _gather(errors: list[_StepError], exc: BaseException | None) -> None:
    """Keep a step's failure; anything else (our own bug) is raised at once."""
    if isinstance(exc, _StepError):
        errors.append(exc)
    elif exc is not None:
        raise exc


def _first(errors: Sequence[_StepError]) -> _StepError:
    """The failure a group ends the run with: an interruption wins over a failure (the run is
    then resumable as a whole), else the lowest-numbered failed step."""
    for err in errors:
        if isinstance(err.error, Interrupted):
            return err
    return min(errors, key=lambda e: e.step.index)
