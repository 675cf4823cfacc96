"""One changing operation — a run, a resume, a rollback — while it holds its locks.

The three share one set-up (``Engine._session``, rotate.engine.api): the credential's locks
are taken, then the operation's journal is opened with its first record
(:meth:`Session.open_journal`), then its steps run through an
:class:`~rotate.engine.executor.Executor` over one :class:`~rotate.engine.kinds.base.Run`
(:meth:`Session.execute`, the run closed when they end); on the way out, whatever happened,
the journal is closed and then the locks are released.  What differs between the three —
preflight and the plan, what is left of a journal, a rollback's restore — stays in their
own methods.

The executor and the step kinds are imported when steps run, not with this module
(start-up: bench/startup.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rotate.chain.model import Chain, Credential
from rotate.engine import journal as journal_mod
from rotate.engine.journal import Journal
from rotate.engine.model import Adapters, Observer, Options, PreflightResult
from rotate.engine.run_start import RunStart

if TYPE_CHECKING:
    from rotate.core.secret import Secret
    from rotate.core.waiting import CancelToken
    from rotate.engine.executor import Executor
    from rotate.engine.lock import Locks
    from rotate.engine.runstore import RunStore


def settings(chain: Chain, credential: Credential, options: Options) -> tuple[float, int]:
    """(per-step timeout, consumers at once): the options', else the chain file's."""
    timeout = options.timeout if options.timeout is not None else chain.timeout_for(credential)
    parallel = options.max_parallel or chain.defaults.max_parallel
    return timeout, max(1, parallel)


@dataclass
class Session:
    """The locks held, and the journal once opened, of one operation writing run
    ``run_id``'s journal.  Made and closed by ``Engine._session`` only."""

    chain: Chain
    credential: Credential
    adapters: Adapters
    options: Options
    environ: Mapping[str, str]
    run_id: str
    lease: Locks
    runs: RunStore
    journal: Journal | None = None
    #: a run of several credentials (rotate.engine.merge): all of them, ``credential`` the
    #: first; () for a run of one
    members: tuple[Credential, ...] = ()
    #: whether every journal this session closed is whole in the cluster too (or has no
    #: cluster copy to keep): the locks are released only then (Engine._session)
    mirrored: bool = True

    def open_journal(self, event: str, data: Mapping[str, Any]) -> Journal:
        """The run's journal, with this operation's first record (``run.start``,
        ``run.resume``) appended."""
        self.journal = self.runs.open_journal(self.run_id)
        self.journal.append(event, data=dict(data))
        return self.journal

    def execute(
        self, start: RunStart, observer: Observer, cancel: CancelToken,
        steps: Callable[[Executor], None], *, new_value: Secret | None = None,
        observed: PreflightResult | None = None,
        observed_by: Mapping[str, PreflightResult] | None = None,
        values: Mapping[str, Secret] | None = None,
    ) -> None:
        """``steps`` driven by an executor over this operation's run, in the open journal.
        ``observed``: what preflight read moments ago (a fresh run's only); of a run of
        several credentials, ``observed_by`` and ``values`` (each one's candidate)."""
        if self.members:
            self._execute_members(start, observer, cancel, steps, observed_by or {},
                                  values or {})
            return
        from rotate.engine.executor import Executor
        from rotate.engine.kinds.base import Run

        if self.journal is None:
            raise RuntimeError("Session.execute before open_journal")
        seen = observed if observed is not None else PreflightResult()
        timeout, parallel = settings(self.chain, self.credential, self.options)
        run = Run(self.chain, self.credential, self.adapters, self.journal, cancel, timeout,
                  parallel, start, new_value=new_value, environ=self.environ, observed=seen)
        with closing(run):
            steps(Executor(run, observer, lease=self.lease, uids=seen.uids))

    def _execute_members(
        self, start: RunStart, observer: Observer, cancel: CancelToken,
        steps: Callable[[Executor], None], observed_by: Mapping[str, PreflightResult],
        values: Mapping[str, Secret],
    ) -> None:
        """A run of several credentials: one :class:`Run` per credential (its own start, value
        and results: what its steps read), sharing the journal, the cancel token, the
        settings and the watched caches of the lead run, which holds the whole start."""
        from rotate.engine.executor import Executor
        from rotate.engine.kinds.base import Run

        assert self.journal is not None
        timeout, parallel = settings(self.chain, self.credential, self.options)
        lead = Run(self.chain, self.credential, self.adapters, self.journal, cancel, timeout,
                   parallel, start, environ=self.environ)
        runs: dict[str, Run] = {}
        uids: dict[Any, str] = {}
        for cred in self.members:
            seen = observed_by.get(cred.name, PreflightResult())
            uids.update(seen.uids)
            member = Run(self.chain, cred, self.adapters, self.journal, cancel, timeout,
                         parallel, start.member(cred.name), new_value=values.get(cred.name),
                         environ=self.environ, observed=seen)
            member.caches.close()
            member.caches = lead.caches  # one informer per namespace for the whole run
            runs[cred.name] = member
        with closing(lead):
            steps(Executor(lead, observer, lease=self.lease, uids=uids, members=runs))

    def close(self) -> None:
        """Close the journal, if open (again: nothing)."""
        if self.journal is not None:
            self.journal.close()
            mirror = self.journal.mirror
            if mirror is not None and not getattr(mirror, "caught_up", True):
                self.mirrored = False
            self.journal = None

    def finish(self) -> journal_mod.RunState:
        """The journal closed and read back: the operation's final state."""
        self.close()
        return journal_mod.load(self.options.state_dir, self.run_id)
