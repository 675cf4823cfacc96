"""The engine: the one object the CLI calls (docs/design.md "Engine ↔ CLI").

An :class:`Engine` is built with its adapter factory and its chain loader — the CLI hands it
the real ones (rotate.engine.wiring), tests hand it fakes; nothing is patched.

The read-only views (``runs``, ``show``, ``list``, ``status``, ``due``, ``watch``,
``doctor``) and the set-up every entry point shares (chain, adapters, run journals) are
:class:`rotate.engine.readonly.ReadOnlyEngine`'s; this module adds what changes things.
Start-up cost: it imports only the models, the journal and the run start; what plans, runs
and rolls back (step kinds, stages, executor, preflight, locks) is imported by the method
that needs it, so that ``rotate list`` does not pay for the whole engine (bench/startup.py).

``run``/``resume``/``rollback`` return a RunReport whose ``exit_code`` follows cli.md; they
raise RotateError subclasses only *before* anything changed: UsageError, ChainFileError,
PreflightFailed (with ``.plan`` attached for display), LockHeld.  They share one set-up,
:meth:`Engine._session` (locks → journal → run and executor → journal closed → locks
released, rotate.engine.session), so the lock is always released when they return,
whatever happened — except while the run's journal is not whole in the cluster (the API
server was unreachable): then the Leases are left to expire, so that no other machine starts
on top of a run it cannot see (docs/design.md "Where the journal lives").
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rotate.chain.model import Chain, Credential
from rotate.chain.value_graph import consumers_of
from rotate.core.errors import NothingToAdopt, PreflightFailed, UsageError
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.engine import journal as journal_mod
from rotate.engine.journal import PREFLIGHT
from rotate.engine.model import (
    Adapters,
    Adoption,
    Observer,
    Options,
    Plan,
    PlannedStep,
    PreflightResult,
    RunReport,
    StepRecord,
)
from rotate.engine.readonly import ReadOnlyEngine
from rotate.engine.starting import (
    acquire,
    candidate_for,
    lease_for,
    mark_rolled_back,
    new_run_id,
    refuse_overtaken,
    run_start_record,
    strategy_for,
    with_unfinished,
)

if TYPE_CHECKING:
    from rotate.core.waiting import CancelToken
    from rotate.engine.session import Session
    from rotate.engine.several import Several


def _nothing_to_adopt(chain: Chain, cred: Credential, strategy: Strategy,
                      adopt: Adoption) -> Plan:
    """The plan of ``--adopt`` when the backend holds the chain's value: no step, no check
    (nothing is contacted beyond the backend's reads that found it)."""
    from rotate.engine.plan import build_plan

    return build_plan(chain, cred, strategy, PreflightResult(
        current_version=adopt.version, consumers=consumers_of(chain, cred.name)), adopt)


class Engine(ReadOnlyEngine):
    """Plans, runs, resumes and rolls back rotations with the adapters it is given; the
    read-only views and the set-up they share come from :class:`ReadOnlyEngine`."""

    @contextmanager
    def _session(
        self, chain: Chain, cred: Credential, adapters: Adapters, options: Options,
        run_id: str, *, reclaim_run: str | None = None,
        members: tuple[Credential, ...] = (),
    ) -> Iterator[Session]:
        """The one set-up of ``run``, ``resume`` and ``rollback``: the locks of ``cred`` (of
        every one of ``members``, a run of several) taken for run ``run_id`` and held for the
        block, whose :class:`Session` journals and runs the steps; on the way out, whatever
        happened, the journal is closed, then the locks released."""
        from rotate.engine.session import Session

        runs = self._runstore(options, chain, adapters.kube)
        names = [m.name for m in members] if members else cred.name
        lease = lease_for(chain, adapters, names, run_id, runs)
        acquire(lease, options, reclaim_run=reclaim_run)
        session = Session(chain, cred, adapters, options, self.environ, run_id, lease, runs,
                          members=members)
        try:
            yield session
        finally:
            try:
                session.close()
                adapters.kube.close_forwards()  # the run's port-forwards to providers
            finally:
                if session.mirrored:
                    lease.release()
                else:
                    lease.abandon()
                    self._warn(f"the lock Lease {lease.namespace}/{lease.name} is left to "
                               "expire, not released: until the run's journal is in the "
                               "cluster, no other machine may start on top of it")

    def _several(self) -> Several:
        from rotate.engine.several import Several

        return Several(self.load_chain, self._adapters, self._session, self.environ,
                       self._runstore)

    # ------------------------------------------------------------------ plan / run

    def plan_several(self, options: Options, credentials: Sequence[str]) -> Plan:
        """The plan of one run of several credentials (rotate.engine.several). Changes
        nothing."""
        return self._several().plan(options, credentials)

    def run_several(self, options: Options, credentials: Sequence[str], observer: Observer,
                    cancel: CancelToken) -> RunReport:
        """Several credentials rotated as one run (rotate.engine.several)."""
        return self._several().run(options, credentials, observer, cancel)

    def plan(self, options: Options, credential: str) -> Plan:
        """Preflight + the ordered steps. Changes nothing."""
        from rotate.engine.plan import build_plan
        from rotate.engine.preflight import preflight
        from rotate.engine.value_rules import check_new_value

        chain = self.load_chain(options)
        cred = chain.credential(credential)
        strategy = strategy_for(options, cred)
        if not options.adopt:
            check_new_value(cred, None)
        adapters = self._adapters(chain, options, cred)
        adopt, adopted = self._adoption(options, adapters, cred, strategy)
        if adopt is not None and adopt.noop:
            return _nothing_to_adopt(chain, cred, strategy, adopt)
        candidate = adopted if adopted is not None else candidate_for(cred, None)
        try:
            observed = preflight(chain, cred, adapters, strategy=strategy,
                                 candidate=candidate, environ=self.environ,
                                 held_version=adopt.chain_version if adopt is not None
                                 else None)
        finally:
            adapters.kube.close_forwards()  # preflight's provider logins, if any
        runs = self._runstore(options, chain, adapters.kube)
        return build_plan(chain, cred, strategy, with_unfinished(observed, options, cred, runs),
                          adopt)

    @staticmethod
    def _adoption(options: Options, adapters: Adapters, cred: Credential,
                  strategy: Strategy) -> tuple[Adoption | None, Secret | None]:
        """``--adopt``: what the backend holds that no rotate run wrote, and its value
        (rotate.engine.adoption); (None, None) for a rotation with a new value."""
        if not options.adopt:
            return None, None
        from rotate.engine.adoption import adoption

        return adoption(adapters.vault, cred, strategy)

    def run(
        self, options: Options, credential: str, observer: Observer, cancel: CancelToken,
        new_value: Secret | None = None,
    ) -> RunReport:
        from rotate.engine.executor import report_from
        from rotate.engine.plan import build_plan
        from rotate.engine.preflight import describe_failures, preflight
        from rotate.engine.value_rules import check_new_value

        chain = self.load_chain(options)
        cred = chain.credential(credential)
        strategy = strategy_for(options, cred)
        if options.adopt and new_value is not None:
            raise UsageError("--adopt carries the value the backend holds; --value-stdin gives "
                             "another: use one of them")
        if cred.value_from == "stdin" and new_value is None and not options.adopt:
            raise UsageError(
                f"credential {cred.name} takes its value from stdin: use --value-stdin")
        if not options.adopt:
            check_new_value(cred, new_value)
        adapters = self._adapters(chain, options, cred)
        adopt, adopted = self._adoption(options, adapters, cred, strategy)
        if adopt is not None and adopt.noop:
            nothing = NothingToAdopt(f"nothing to adopt: {adopt.detail}; nothing was changed")
            nothing.plan = _nothing_to_adopt(chain, cred, strategy,  # type: ignore[attr-defined]
                                             adopt)
            raise nothing
        run_id = new_run_id(cred.name)
        with self._session(chain, cred, adapters, options, run_id) as session:
            candidate = adopted if adopted is not None else candidate_for(cred, new_value)
            pre = PlannedStep(0, 0, PREFLIGHT, cred.name, "connectivity, permissions, traps")
            observer.step_started(pre)
            began = time.monotonic()
            observed = with_unfinished(
                preflight(chain, cred, adapters, strategy=strategy, candidate=candidate,
                          environ=self.environ,
                          held_version=adopt.chain_version if adopt is not None else None),
                options, cred, session.runs)
            preflight_seconds = round(time.monotonic() - began, 3)
            the_plan = build_plan(chain, cred, strategy, observed, adopt)
            passed = sum(1 for c in the_plan.preflight if c.ok)
            observer.step_finished(pre, StepRecord(
                0, 0, PREFLIGHT, cred.name, "done" if the_plan.ok else "failed",
                seconds=preflight_seconds, detail=f"{passed}/{len(the_plan.preflight)} ok"))
            if not the_plan.ok:
                exc = PreflightFailed(describe_failures(the_plan.preflight, the_plan.traps))
                exc.plan = the_plan  # type: ignore[attr-defined]
                raise exc
            start = run_start_record(chain, cred, run_id, "rotate", strategy,
                               [pre, *the_plan.steps], observed.current_version,
                               tuple(observed.consumers), session.lease.holder,
                               supplied=new_value, adopt=adopt)
            journal = session.open_journal("run.start", start.to_json())
            journal.append("step.start", step=pre, data={})
            journal.append("step.done", step=pre, data={
                "detail": f"{passed} checks passed", "seconds": preflight_seconds,
                "traps": [t.name for t in the_plan.traps]})
            session.execute(start, observer, cancel,
                            lambda executor: executor.execute(the_plan.steps),
                            new_value=candidate, observed=observed)
            return report_from(session.finish())

    def resume(
        self, options: Options, run_id: str, observer: Observer, cancel: CancelToken,
        new_value: Secret | None = None,
    ) -> RunReport:
        """Continue from the first unfinished step; the value is re-read, never regenerated.

        A run started with ``--value-stdin`` that failed before its backend write needs the
        value again (``new_value``), checked against the journal's fingerprint (exit 2)."""
        from rotate.engine.executor import report_from
        from rotate.engine.resumption import resume_steps, supplied_again

        chain = self.load_chain(options)
        runs = self._runstore(options, chain)
        state = runs.load(run_id)
        if state.status in ("succeeded", "rolled-back"):
            raise UsageError(f"run {run_id} is {state.status}; nothing to resume")
        refuse_overtaken(runs, state)
        new_value = supplied_again(state, new_value)
        if state.start.members:
            return self._several().resume(options, state, observer, cancel)
        cred = chain.credential(state.credential)
        adapters = self._adapters(chain, options, cred)
        with self._session(chain, cred, adapters, options, run_id,
                           reclaim_run=run_id) as session:
            session.open_journal("run.resume", {"holder": session.lease.holder})
            session.execute(state.start, observer, cancel,
                            lambda executor: resume_steps(state, executor), new_value=new_value)
            final = session.finish()
            if final.operation == "rollback" and final.status == "succeeded":
                mark_rolled_back(session.runs, final.start.of_run, run_id)
            return report_from(journal_mod.load(options.state_dir, run_id))

    def rollback(
        self, options: Options, run_id: str, observer: Observer, cancel: CancelToken,
    ) -> RunReport:
        """Restore what run ``run_id`` replaced, as a run of its own (operation rollback)."""
        from rotate.engine.executor import report_from
        from rotate.engine.rollback import backend_written, build_rollback, guard

        chain = self.load_chain(options)
        orig = self._runstore(options, chain).load(run_id)
        if orig.operation != "rotate":
            raise UsageError(
                f"run {run_id} is a {orig.operation}; roll back the rotation it undid")
        if orig.status == "rolled-back":
            raise UsageError(f"run {run_id} was already rolled back by {orig.rolled_back_by}")
        if orig.start.members:
            return self._several().rollback(options, orig, observer, cancel)
        cred = chain.credential(orig.credential)
        adapters = self._adapters(chain, options, cred)
        rb_id = new_run_id(cred.name)
        with self._session(chain, cred, adapters, options, rb_id,
                           reclaim_run=run_id) as session:
            written_from = backend_written(adapters.vault, cred, orig)
            steps, restore, consumers = build_rollback(chain, cred, orig, written_from)
            if restore is not None and written_from is not None:
                restore = guard(chain, cred, adapters, orig, written_from, restore, options,
                                session.runs)
            start = run_start_record(chain, cred, rb_id, "rollback", orig.strategy, steps,
                               written_from, consumers, session.lease.holder, of_run=run_id,
                               restore=restore)
            journal = session.open_journal("run.start", start.to_json())
            if not steps:
                journal.append("run.end", data={
                    "status": "succeeded", "exit_code": 0,
                    "message": f"run {run_id} never wrote a value; nothing to roll back"})
            else:
                session.execute(start, observer, cancel,
                                lambda executor: executor.execute(steps))
            final = session.finish()
            if final.status == "succeeded":  # nothing to roll back also settles the run
                mark_rolled_back(session.runs, run_id, rb_id)
            return report_from(final)
