"""The engine's read-only half: what every entry point builds from (the chain file, the
adapters, the run journals) and the views that change nothing and take no lock — ``runs``,
``show``, ``list``, ``status``, ``due``, ``watch`` and ``doctor``.

:class:`rotate.engine.api.Engine` extends it with what plans, runs, resumes and rolls back,
so the CLI still holds one object.  Invariant: nothing here changes the chain — no backend,
Secret, provider or Config Center write, no lock taken (``watch`` only starts child
``rotate`` processes, each a run of its own); the one write is the run journals' catch-up
(:meth:`RunStore.catch_up`: local journals an unreachable API server left behind, copied
to the cluster).  What a view needs beyond the models and the journal is imported by the
method that needs it, so that ``rotate list`` does not pay for the whole engine
(bench/startup.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from rotate.chain.model import Chain, Credential
from rotate.chain.value_graph import consumers_of
from rotate.core.errors import JournalUnreadable, RotateError, UsageError
from rotate.core.timestamps import utcnow
from rotate.engine import journal as journal_mod
from rotate.engine.member import JOIN
from rotate.engine.model import (
    AdapterFactory,
    Adapters,
    ChainLoader,
    Check,
    CredentialSummary,
    Options,
    RunReport,
    RunSummary,
)

if TYPE_CHECKING:
    import threading

    from rotate.clients.seams import Kube
    from rotate.engine.due import Due
    from rotate.engine.runstore import RunStore
    from rotate.engine.status import CredentialStatus
    from rotate.engine.watch_service import WatchSettings

T = TypeVar("T")
#: ``off``: journals are kept in the state directory only (docs/cli.md "State directory")
CLUSTER_JOURNAL_ENV = "ROTATE_CLUSTER_JOURNAL"


def _stderr_warning(text: str) -> None:
    import sys

    sys.stderr.write(f"warning: {text}\n")


def _summary(state: journal_mod.RunState) -> RunSummary:
    failed = next((f"{s.step.kind} {s.step.target}" for s in state.steps
                   if s.status in ("failed", "interrupted")), None)
    return RunSummary(state.run_id, state.credential, state.started_at,
                      state.status,  # type: ignore[arg-type]
                      failed, state.operation)


class ReadOnlyEngine:
    """The chain, the adapters and the journals every entry point starts from, and the
    views that change nothing (the module docstring says what that excludes)."""

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
