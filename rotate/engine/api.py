"""The engine: the one object the CLI calls (docs/design.md "Engine ↔ CLI").

An :class:`Engine` is built with its adapter factory and its chain loader — the CLI hands it
the real ones (rotate.engine.wiring), tests hand it fakes; nothing is patched.

Start-up cost: the read-only views (``runs``, ``show``, ``list_credentials``) need only the
chain and engine models and the journal, which is all this module imports; what plans, runs
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

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from rotate.chain.model import Chain, Credential, consumers_of
from rotate.core.errors import (
    JournalUnreadable,
    NothingToAdopt,
    PreflightFailed,
    RotateError,
    UsageError,
)
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.core.timestamps import utcnow
from rotate.engine import journal as journal_mod
from rotate.engine.journal import PREFLIGHT
from rotate.engine.member import JOIN
from rotate.engine.model import (
    AdapterFactory,
    Adapters,
    Adoption,
    ChainLoader,
    Check,
    CredentialSummary,
    Observer,
    Options,
    Plan,
    PlannedStep,
    PreflightResult,
    RunReport,
    RunSummary,
    StepRecord,
)
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
    import threading

    from rotate.clients.seams import Kube
    from rotate.core.waiting import CancelToken
    from rotate.engine.due import Due
    from rotate.engine.runstore import RunStore
    from rotate.engine.session import Session
    from rotate.engine.several import Several
    from rotate.engine.status import CredentialStatus
    from rotate.engine.watch_service import WatchSettings

T = TypeVar("T")
#: ``off``: journals are kept in the state directory only (docs/cli.md "State directory")
CLUSTER_JOURNAL_ENV = "ROTATE_CLUSTER_JOURNAL"


def _stderr_warning(text: str) -> None:
    import sys

    sys.stderr.write(f"warning: {text}\n")



def _nothing_to_adopt(chain: Chain, cred: Credential, strategy: Strategy,
                      adopt: Adoption) -> Plan:
    """The plan of ``--adopt`` when the backend holds the chain's value: no step, no check
    (nothing is contacted beyond the backend's reads that found it)."""
    from rotate.engine.plan import build_plan

    return build_plan(chain, cred, strategy, PreflightResult(
        current_version=adopt.version, consumers=consumers_of(chain, cred.name)), adopt)


def _summary(state: journal_mod.RunState) -> RunSummary:
    failed = next((f"{s.step.kind} {s.step.target}" for s in state.steps
                   if s.status in ("failed", "interrupted")), None)
    return RunSummary(state.run_id, state.credential, state.started_at,
                      state.status,  # type: ignore[arg-type]
                      failed, state.operation)



class Engine:
    """Plans, runs, resumes and rolls back rotations with the adapters it is given."""

    def __init__(self, adapters: AdapterFactory, chain_loader: ChainLoader,
                 environ: Mapping[str, str] | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self._factory = adapters
        self._load = chain_loader
        self._environ = environ
        #: what ``status`` could not push (None: pushed, or nothing configured)
        self.status_warning: str | None = None
        self._warn = warn or _stderr_warning

    @property
    def environ(self) -> Mapping[str, str]:
        return self._environ if self._environ is not None else os.environ

    def load_chain(self, options: Options) -> Chain:
        return self._load(options.chain_file)

    def _runstore(self, options: Options, chain: Chain | None = None,
                  kube: Kube | None = None) -> RunStore:
        """The runs of the state directory and of the cluster (rotate.engine.runstore),
        local runs left behind by an unreachable API server caught up first.  Without a
        chain file or a cluster to reach (or with ``ROTATE_CLUSTER_JOURNAL=off``): the state
        directory alone."""
        from rotate.clients.cluster_journals import ClusterJournals
        from rotate.engine.runstore import RunStore

        if self.environ.get(CLUSTER_JOURNAL_ENV, "").lower() in ("off", "0", "false", "no"):
            return RunStore(options.state_dir, None, self._warn)
        if chain is None:
            try:
                chain = self.load_chain(options)
            except RotateError:
                return RunStore(options.state_dir, None, self._warn)
        if kube is None:
            try:
                kube = self._factory.kube(chain, options, self.environ)
            except RotateError as exc:
                self._warn(f"the run journals in the cluster are not read: {exc.message}")
                return RunStore(options.state_dir, None, self._warn)
        runs = RunStore(options.state_dir, ClusterJournals(kube, chain.cluster.lock_namespace),
                        self._warn)
        runs.catch_up()
        return runs

    def _adapters(self, chain: Chain, options: Options, *credentials: Credential) -> Adapters:
        """Every adapter, or one UsageError listing what each one misses (all at once),
        the drivers ``credentials``' providers need included (rotate.clients.drivers)."""
        from rotate.clients.drivers import missing_drivers

        f, env = self._factory, self.environ
        problems = missing_drivers(list(credentials))

        def build(make: Callable[[], T]) -> T | None:
            try:
                return make()
            except UsageError as exc:
                problems.append(exc.message)
                return None

        kube = build(lambda: f.kube(chain, options, env))
        vault = build(lambda: f.vault(chain, env))
        cc = build(lambda: f.config_center(chain, env))
        if kube is None or vault is None or cc is None or problems:
            if len(problems) == 1:
                raise UsageError(problems[0])
            raise UsageError("; ".join(problems))
        return Adapters(vault=vault, kube=kube, config_center=cc, readyz=f.readyz(kube),
                        providers=f.providers(), metrics=f.metrics())

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

    # ------------------------------------------------------------------ read-only views

    def runs(
        self, options: Options, unreadable: list[JournalUnreadable] | None = None,
    ) -> list[RunSummary]:
        """Every readable run, newest first; a journal that cannot be read is skipped and,
        when ``unreadable`` is given, added to it (``rotate runs`` names it, exit 6)."""
        return [_summary(state)
                for state in self._runstore(options).load_runs(unreadable)]

    def show(self, options: Options, run_id: str) -> RunReport:
        from rotate.engine.executor import report_from

        return report_from(self._runstore(options).load(run_id))

    def list_credentials(self, options: Options) -> list[CredentialSummary]:
        # Validated as fully as a rotation: a file `rotate CRED` refuses must not list.
        chain = self.load_chain(options)
        # the state directory alone: `rotate list` makes no request (bench/startup.py)
        history = [_summary(s) for s in journal_mod.load_runs(options.state_dir)]
        out = []
        for name, cred in chain.credentials.items():
            last = next((r for r in history if name in r.credential.split(JOIN)), None)
            out.append(CredentialSummary(name, cred.description,
                                         tuple(str(p) for p in cred.providers),
                                         consumers_of(chain, name), cred.strategy, last))
        return out

    def status(self, options: Options, credentials: Sequence[str] = ()) -> list[CredentialStatus]:
        """Each link of each named credential's chain (every one when none is named), proven
        now; changes nothing, takes no lock (rotate.engine.status).  A Pushgateway configured
        for the runs gets ``rotate_chain_closed`` (a failure: :attr:`status_warning`)."""
        from rotate.engine.status import observe, push_closed

        chain = self.load_chain(options)
        creds = [chain.credential(name) for name in dict.fromkeys(credentials)] or list(
            chain.credentials.values())
        adapters = self._adapters(chain, options, *creds)
        try:
            found = observe(chain, creds, adapters, self.environ,
                            self._runstore(options, chain, adapters.kube), utcnow)
        finally:
            adapters.kube.close_forwards()  # the provider probes' port-forwards, if any
        self.status_warning = push_closed(chain, found, self.environ)
        return found

    def watch(self, options: Options, credentials: Sequence[str], settings: WatchSettings,
              stop: threading.Event, child_args: Sequence[str],
              log: Callable[[str], None]) -> None:
        """``rotate watch`` until ``stop`` (rotate.engine.watcher): UsageError before it
        starts when the chain file, the cluster or kopf cannot be used."""
        from rotate.clients.drivers import watch_driver_missing
        from rotate.clients.rotate_process import RotateProcess
        from rotate.engine.watch_service import ChainObserver, due_now, serve

        missing = watch_driver_missing()
        if missing:
            raise UsageError(missing)
        chain = self.load_chain(options)
        for name in credentials:
            chain.credential(name)  # an unknown name: UsageError before anything starts
        kube = self._factory.kube(chain, options, self.environ)
        self._factory.vault(chain, self.environ)  # fails now, not at the first change
        vault = lambda: self._factory.vault(chain, self.environ)  # noqa: E731 (a fresh login)
        runs = lambda: self._runstore(options, chain, kube)  # noqa: E731
        runner = RotateProcess(child_args, self.environ)
        serve(chain, credentials, kube, ChainObserver(chain, kube, vault, runs), runner,
              settings, stop, log, due=due_now(chain, credentials, vault, runs))

    def due(self, options: Options, credentials: Sequence[str] = (),
            now: datetime | None = None) -> tuple[Due, ...]:
        """Whether each named credential (every one when none is named) is due for a
        rotation at ``now`` (default: the clock), why, and when next
        (rotate.engine.due.due_credentials).  Read-only: the backend's metadata (no value)
        and the run journals — read only when a credential has a ``schedule``.  An unknown
        name is a UsageError naming the known ones."""
        from rotate.engine.due import due_credentials

        chain = self.load_chain(options)
        creds = [chain.credential(name) for name in dict.fromkeys(credentials)] or list(
            chain.credentials.values())
        vault = self._factory.vault(chain, self.environ)
        engine = self

        class _Runs:  # the journals, read the first time they are asked for
            where = "the state directory and the cluster"

            def load_runs(self) -> Iterator[journal_mod.RunState]:
                return engine._runstore(options, chain).load_runs()

        return due_credentials(chain, creds, vault, _Runs(), now or utcnow())

    def doctor(self, options: Options) -> list[Check]:
        """Connectivity and every permission any run needs, for every credential in the
        chain.  An adapter that cannot be built is one failed check; the others still run.
        A driver the chain needs and the install lacks is a UsageError, as for a run."""
        from rotate.clients.drivers import missing_drivers
        from rotate.engine.preflight import doctor_checks

        chain = self.load_chain(options)
        problems = missing_drivers(chain.credentials.values())
        if problems:
            raise UsageError("; ".join(problems))
        f, env = self._factory, self.environ
        checks: list[Check] = []

        def build(name: str, make: Callable[[], Any]) -> Any:
            try:
                return make()
            except RotateError as exc:
                checks.append(Check(f"{name}.config", False, exc.message))
                return None

        vault = build("backend", lambda: f.vault(chain, env))
        kube = build("kubernetes", lambda: f.kube(chain, options, env))
        if chain.config_center is None:
            checks.append(Check("configcenter.config", True, "no configCenter in the chain "
                                "file: every consumer reads its Secret itself, the Config "
                                "Center checks are skipped"))
            cc = None
        else:
            cc = build("configcenter", lambda: f.config_center(chain, env))
        return checks + doctor_checks(chain, vault, kube, cc, env)
