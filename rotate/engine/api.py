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

import dataclasses
import os
import secrets as _secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from rotate.chain.model import Chain, Credential, consumers_of, strategy_problem
from rotate.core.errors import (
    ClientError,
    JournalUnreadable,
    LockHeld,
    PreflightFailed,
    RotateError,
    UsageError,
)
from rotate.core.fingerprint import fingerprint
from rotate.core.secret import Secret, generate
from rotate.core.strategy import Strategy
from rotate.core.timestamps import utcnow
from rotate.engine import journal as journal_mod
from rotate.engine.journal import PREFLIGHT
from rotate.engine.model import (
    AdapterFactory,
    Adapters,
    ChainLoader,
    Check,
    CredentialSummary,
    Observer,
    Operation,
    Options,
    Plan,
    PlannedStep,
    PreflightResult,
    RunReport,
    RunStart,
    RunSummary,
    StepRecord,
)
from rotate.engine.targets import backend_target

if TYPE_CHECKING:
    from rotate.clients.seams import Kube
    from rotate.core.waiting import CancelToken
    from rotate.engine.kinds.base import Restore
    from rotate.engine.lock import Locks
    from rotate.engine.runstore import RunStore
    from rotate.engine.session import Session

T = TypeVar("T")
#: ``off``: journals are kept in the state directory only (docs/cli.md "State directory")
CLUSTER_JOURNAL_ENV = "ROTATE_CLUSTER_JOURNAL"


def _stderr_warning(text: str) -> None:
    import sys

    sys.stderr.write(f"warning: {text}\n")


def _strategy(options: Options, credential: Credential) -> Strategy:
    strategy = options.strategy or credential.strategy
    if strategy not in set(Strategy):
        raise UsageError(f"unknown strategy {strategy!r} (restart or overlap)")
    problem = strategy_problem(credential, strategy)
    if problem is not None:
        raise UsageError(problem)
    return Strategy(strategy)


def _candidate(credential: Credential, new_value: Secret | None) -> Secret:
    if new_value is not None:
        return new_value
    gen = credential.generate
    if gen is None:
        # Plan of a stdin credential: validate the documents with a value of the usual shape.
        return generate()
    return generate(gen.length, gen.alphabet)


def new_run_id(credential: str) -> str:
    return f"{utcnow():%Y%m%dT%H%M%SZ}-{credential}-{_secrets.token_hex(2)}"


def _holder(run_id: str) -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}/{run_id}"


def _lease(chain: Chain, adapters: Adapters, credential: str, run_id: str,
           runs: RunStore) -> Locks:
    """The credential's Lease and one per provider it rolls (lock.py): a second credential
    on a shared provider exits 4 naming the holder instead of rolling it at the same time."""
    from rotate.engine.lock import Lease, Locks, provider_lease_name

    holder = _holder(run_id)

    def one(name: str | None = None) -> Lease:
        return Lease(adapters.kube, chain.cluster.lock_namespace, credential, holder,
                     duration=chain.defaults.lease_duration, name=name,
                     run_ended=runs.has_ended, run_started=runs.has_started)

    providers = chain.credentials[credential].providers if credential in chain.credentials \
        else ()
    return Locks(one(), [one(provider_lease_name(p)) for p in providers])


def _acquire(lease: Locks, options: Options, reclaim_run: str | None = None) -> None:
    """Take the lock; a failure other than "held" means nothing could start (exit 3)."""
    try:
        lease.acquire(take_over=options.take_over_lock, reclaim_run=reclaim_run)
    except LockHeld:
        raise
    except ClientError as exc:
        raise PreflightFailed(
            f"cannot take the lock Lease {lease.namespace}/{lease.name}: {exc.message} "
            f"(does namespace {lease.namespace} exist, may you create leases in it?)") from None


def _run_start(
    chain: Chain, cred: Credential, run_id: str, operation: Operation, strategy: Strategy,
    steps: list[PlannedStep], current_version: int | None, consumers: tuple[str, ...],
    holder: str, *, of_run: str | None = None, restore: Restore | None = None,
    supplied: Secret | None = None,
) -> RunStart:
    return RunStart(
        run_id=run_id, credential=cred.name, operation=operation, strategy=strategy,
        chain_file=str(chain.file), backend_path=backend_target(chain, cred).split("#")[0],
        current_version=current_version, consumers=consumers,
        providers=tuple(str(p) for p in cred.providers), steps=tuple(steps), holder=holder,
        of_run=of_run,
        restore_backend_version=restore.backend_version if restore else None,
        restore_config=dict(restore.config_versions) if restore else {},
        restore_config_match=dict(restore.config_match) if restore else {},
        value_fingerprint=fingerprint(supplied) if supplied is not None else None)


def _mark_rolled_back(runs: RunStore, original: str | None, by: str) -> None:
    if not original:
        return
    j = runs.open_journal(original)
    try:
        j.append("run.rolled-back", data={"by": by})
    finally:
        j.close()


def _summary(state: journal_mod.RunState) -> RunSummary:
    failed = next((f"{s.step.kind} {s.step.target}" for s in state.steps
                   if s.status in ("failed", "interrupted")), None)
    return RunSummary(state.run_id, state.credential, state.started_at,
                      state.status,  # type: ignore[arg-type]
                      failed, state.operation)


def _with_unfinished(observed: PreflightResult, options: Options,
                     cred: Credential, runs: RunStore) -> PreflightResult:
    """Preflight's checks with ``runs.unfinished`` first (rotate.engine.unfinished)."""
    from rotate.engine.unfinished import unfinished_check

    check = unfinished_check(runs, cred.name, force=options.force)
    return dataclasses.replace(observed, checks=(check, *observed.checks))


def _refuse_overtaken(runs: RunStore, state: journal_mod.RunState) -> None:
    """PreflightFailed (exit 3, nothing changed) when a later run of the credential changed
    the chain: resuming this one would continue with a value the chain no longer holds."""
    from rotate.engine.unfinished import describe, later_runs

    later = later_runs(runs, state)
    if later:
        raise PreflightFailed(
            f"run {state.run_id} cannot be resumed, nothing was changed: a later run of "
            f"{state.credential} changed the chain since — {describe(later[0])}",
            hint=f"act on the latest run instead (`rotate resume {later[0].run_id} --confirm` "
                 f"or `rotate rollback {later[0].run_id} --confirm`)")


class Engine:
    """Plans, runs, resumes and rolls back rotations with the adapters it is given."""

    def __init__(self, adapters: AdapterFactory, chain_loader: ChainLoader,
                 environ: Mapping[str, str] | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self._factory = adapters
        self._load = chain_loader
        self._environ = environ
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

    def _adapters(self, chain: Chain, options: Options, credential: Credential) -> Adapters:
        """Every adapter, or one UsageError listing what each one misses (all at once),
        the drivers ``credential``'s providers need included (rotate.clients.drivers)."""
        from rotate.clients.drivers import missing_drivers

        f, env = self._factory, self.environ
        problems = missing_drivers([credential])

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
                        providers=f.providers())

    @contextmanager
    def _session(
        self, chain: Chain, cred: Credential, adapters: Adapters, options: Options,
        run_id: str, *, reclaim_run: str | None = None,
    ) -> Iterator[Session]:
        """The one set-up of ``run``, ``resume`` and ``rollback``: the locks of ``cred`` taken
        for run ``run_id`` and held for the block, whose :class:`Session` journals and runs
        the steps; on the way out, whatever happened, the journal is closed, then the locks
        released."""
        from rotate.engine.session import Session

        runs = self._runstore(options, chain, adapters.kube)
        lease = _lease(chain, adapters, cred.name, run_id, runs)
        _acquire(lease, options, reclaim_run=reclaim_run)
        session = Session(chain, cred, adapters, options, self.environ, run_id, lease, runs)
        try:
            yield session
        finally:
            try:
                session.close()
            finally:
                if session.mirrored:
                    lease.release()
                else:
                    lease.abandon()
                    self._warn(f"the lock Lease {lease.namespace}/{lease.name} is left to "
                               "expire, not released: until the run's journal is in the "
                               "cluster, no other machine may start on top of it")

    # ------------------------------------------------------------------ plan / run

    def plan(self, options: Options, credential: str) -> Plan:
        """Preflight + the ordered steps. Changes nothing."""
        from rotate.engine.plan import build_plan
        from rotate.engine.preflight import preflight
        from rotate.engine.value_rules import check_new_value

        chain = self.load_chain(options)
        cred = chain.credential(credential)
        strategy = _strategy(options, cred)
        check_new_value(cred, None)
        adapters = self._adapters(chain, options, cred)
        observed = preflight(chain, cred, adapters, strategy=strategy,
                             candidate=_candidate(cred, None), environ=self.environ)
        return build_plan(chain, cred, strategy, _with_unfinished(
            observed, options, cred, self._runstore(options, chain, adapters.kube)))

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
        strategy = _strategy(options, cred)
        if cred.value_from == "stdin" and new_value is None:
            raise UsageError(
                f"credential {cred.name} takes its value from stdin: use --value-stdin")
        check_new_value(cred, new_value)
        adapters = self._adapters(chain, options, cred)
        run_id = new_run_id(cred.name)
        with self._session(chain, cred, adapters, options, run_id) as session:
            candidate = _candidate(cred, new_value)
            pre = PlannedStep(0, 0, PREFLIGHT, cred.name, "connectivity, permissions, traps")
            observer.step_started(pre)
            began = time.monotonic()
            observed = _with_unfinished(
                preflight(chain, cred, adapters, strategy=strategy, candidate=candidate,
                          environ=self.environ), options, cred, session.runs)
            preflight_seconds = round(time.monotonic() - began, 3)
            the_plan = build_plan(chain, cred, strategy, observed)
            passed = sum(1 for c in the_plan.preflight if c.ok)
            observer.step_finished(pre, StepRecord(
                0, 0, PREFLIGHT, cred.name, "done" if the_plan.ok else "failed",
                seconds=preflight_seconds, detail=f"{passed}/{len(the_plan.preflight)} ok"))
            if not the_plan.ok:
                exc = PreflightFailed(describe_failures(the_plan.preflight, the_plan.traps))
                exc.plan = the_plan  # type: ignore[attr-defined]
                raise exc
            start = _run_start(chain, cred, run_id, "rotate", strategy,
                               [pre, *the_plan.steps], observed.current_version,
                               tuple(observed.consumers), session.lease.holder,
                               supplied=new_value)
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
        _refuse_overtaken(runs, state)
        new_value = supplied_again(state, new_value)
        cred = chain.credential(state.credential)
        adapters = self._adapters(chain, options, cred)
        with self._session(chain, cred, adapters, options, run_id,
                           reclaim_run=run_id) as session:
            session.open_journal("run.resume", {"holder": session.lease.holder})
            session.execute(state.start, observer, cancel,
                            lambda executor: resume_steps(state, executor), new_value=new_value)
            final = session.finish()
            if final.operation == "rollback" and final.status == "succeeded":
                _mark_rolled_back(session.runs, final.start.of_run, run_id)
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
            start = _run_start(chain, cred, rb_id, "rollback", orig.strategy, steps,
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
                _mark_rolled_back(session.runs, run_id, rb_id)
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
            last = next((r for r in history if r.credential == name), None)
            out.append(CredentialSummary(name, cred.description,
                                         tuple(str(p) for p in cred.providers),
                                         consumers_of(chain, name), cred.strategy, last))
        return out

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
        return checks + doctor_checks(chain, vault, kube, cc)
