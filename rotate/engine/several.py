"""Plan, run, resume and roll back several credentials as one run (chain.md "Several
credentials"; the merge of their plans: rotate.engine.merge).

One run id (``<time>-dragonfly+postgres-<hex>``), one journal listing every credential in its
``run.start`` (``members``), one Lease per credential taken in sorted order (then the
providers'), all released at the end.  Preflight runs for every credential at once and
every credential's ``runs.unfinished`` check is in it: one unfinished run of any of them
refuses the whole run.  A resume continues the run as a whole; a rollback restores every
credential the run changed, as one rollback run of the same credentials.  Exit codes are a
one-credential run's: the failed step's kind's.

Not for a credential that takes its value from stdin (one value, one prompt: rotate it
alone) — refused with exit 2, as is a credential named twice.  Each credential keeps its strategy
(``--strategy`` sets all of them); rotate.engine.merge says how they combine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rotate.chain.model import Chain, Credential
from rotate.core.errors import PreflightFailed, UsageError
from rotate.core.strategy import Strategy
from rotate.engine import journal as journal_mod
from rotate.engine.journal import PREFLIGHT
from rotate.engine.member import Member
from rotate.engine.merge import distinct, joined
from rotate.engine.model import (
    Adapters,
    Observer,
    Operation,
    Options,
    Plan,
    PlannedStep,
    PreflightResult,
    RunReport,
    StepRecord,
)
from rotate.engine.run_start import RunStart
from rotate.engine.starting import (
    candidate_for,
    mark_rolled_back,
    new_run_id,
    strategy_for,
    with_unfinished,
)
from rotate.engine.targets import backend_target

if TYPE_CHECKING:
    from rotate.core.secret import Secret
    from rotate.core.waiting import CancelToken
    from rotate.engine.runstore import RunStore
    from rotate.engine.session import Session


def unknown_names(known: Sequence[str], names: Sequence[str]) -> UsageError | None:
    """The error for words that name no credential — by position, never echoed: a word
    after the credential may be a value typed into argv by mistake."""
    unknown = [str(i) for i, name in enumerate(names, start=1) if name not in known]
    if not unknown:
        return None
    return UsageError(
        f"word {', '.join(unknown)} of the {len(names)} after `rotate` is no credential of "
        f"the chain file, which defines: {', '.join(known) or 'none'} (not shown: a new "
        "value is never passed in argv; use --value-stdin)")


def credentials_of(chain: Chain, names: Sequence[str]) -> tuple[Credential, ...]:
    """The run's credentials, sorted; UsageError (exit 2) for one unknown (not echoed),
    named twice, or taking its value from stdin."""
    error = unknown_names(list(chain.credentials), names)
    if error is not None:
        raise error
    creds = tuple(chain.credential(name) for name in distinct(names))
    for cred in creds:
        if cred.value_from == "stdin":
            raise UsageError(f"credential {cred.name} takes its value from stdin: rotate it "
                             "alone, with --value-stdin")
    return creds


def member_of(chain: Chain, cred: Credential, strategy: Strategy,
              current_version: int | None, consumers: tuple[str, ...]) -> Member:
    return Member(cred.name, backend_target(chain, cred).split("#")[0], current_version,
                  consumers, tuple(str(p) for p in cred.providers), strategy=strategy)


def start_of(chain: Chain, run_id: str, operation: Operation,
             steps: Sequence[PlannedStep], members: Sequence[Member], holder: str, *,
             of_run: str | None = None) -> RunStart:
    """The ``run.start`` of a run of several credentials: the first member's backend and
    strategy at the top (what a reader of one-credential journals shows), every member in
    ``members``."""
    first = members[0]
    return RunStart(
        run_id=run_id, credential=joined([m.credential for m in members]),
        operation=operation, strategy=first.strategy, chain_file=str(chain.file),
        backend_path=first.backend_path, current_version=first.current_version,
        consumers=tuple(dict.fromkeys(c for m in members for c in m.consumers)),
        providers=tuple(dict.fromkeys(p for m in members for p in m.providers)),
        steps=tuple(steps), holder=holder, of_run=of_run,
        restore_backend_version=first.restore_backend_version,
        restore_config=first.restore_config, restore_config_match=first.restore_config_match,
        members=tuple(members))


@dataclass(frozen=True)
class Several:
    """What the Engine lends a run of several credentials (rotate.engine.api)."""

    load_chain: Callable[[Options], Chain]
    adapters: Callable[..., Adapters]  # (chain, options, *credentials)
    session: Callable[..., AbstractContextManager[Session]]
    environ: Mapping[str, str]
    #: (options, chain, kube) -> the runs of the state directory and the cluster
    runstore: Callable[..., RunStore]

    def _strategies(self, options: Options,
                    creds: Sequence[Credential]) -> dict[str, Strategy]:
        """Each credential's strategy: ``--strategy`` for all, else each one's own."""
        return {c.name: strategy_for(options, c) for c in creds}

    def _preflight(self, chain: Chain, creds: Sequence[Credential], adapters: Adapters,
                   strategies: Mapping[str, Strategy], candidates: Mapping[str, Secret],
                   options: Options, runs: RunStore) -> dict[str, PreflightResult]:
        """Every credential's preflight, at once, each with its ``runs.unfinished`` check."""
        from rotate.engine.fanout import fan_out
        from rotate.engine.preflight import preflight

        def one(cred: Credential) -> PreflightResult:
            seen = preflight(chain, cred, adapters, strategy=strategies[cred.name],
                             candidate=candidates[cred.name], environ=self.environ)
            return with_unfinished(seen, options, cred, runs)

        return dict(zip([c.name for c in creds], fan_out(list(creds), one), strict=True))

    def plan(self, options: Options, names: Sequence[str]) -> Plan:
        from rotate.engine.merge import build_merged_plan
        from rotate.engine.value_rules import check_new_value

        chain = self.load_chain(options)
        creds = credentials_of(chain, names)
        strategies = self._strategies(options, creds)
        for cred in creds:
            check_new_value(cred, None)
        adapters = self.adapters(chain, options, *creds)
        candidates = {c.name: candidate_for(c, None) for c in creds}
        try:
            observed = self._preflight(chain, creds, adapters, strategies, candidates,
                                       options, self.runstore(options, chain, adapters.kube))
        finally:
            adapters.kube.close_forwards()  # preflight's provider logins, if any
        return build_merged_plan(chain, creds, strategies, observed)

    def run(self, options: Options, names: Sequence[str], observer: Observer,
            cancel: CancelToken) -> RunReport:
        from rotate.engine.executor import report_from
        from rotate.engine.merge import build_merged_plan
        from rotate.engine.preflight import describe_failures
        from rotate.engine.value_rules import check_new_value

        chain = self.load_chain(options)
        creds = credentials_of(chain, names)
        strategies = self._strategies(options, creds)
        for cred in creds:
            check_new_value(cred, None)
        adapters = self.adapters(chain, options, *creds)
        name = joined([c.name for c in creds])
        run_id = new_run_id(name)
        with self.session(chain, creds[0], adapters, options, run_id, members=creds) as session:
            candidates = {c.name: candidate_for(c, None) for c in creds}
            pre = PlannedStep(0, 0, PREFLIGHT, name, "connectivity, permissions, traps")
            observer.step_started(pre)
            began = time.monotonic()
            observed = self._preflight(chain, creds, adapters, strategies, candidates,
                                       options, session.runs)
            seconds = round(time.monotonic() - began, 3)
            the_plan = build_merged_plan(chain, creds, strategies, observed)
            passed = sum(1 for c in the_plan.preflight if c.ok)
            observer.step_finished(pre, StepRecord(
                0, 0, PREFLIGHT, name, "done" if the_plan.ok else "failed", seconds=seconds,
                detail=f"{passed}/{len(the_plan.preflight)} ok"))
            if not the_plan.ok:
                exc = PreflightFailed(describe_failures(the_plan.preflight, the_plan.traps))
                exc.plan = the_plan  # type: ignore[attr-defined]
                raise exc
            members = [member_of(chain, c, strategies[c.name],
                                 observed[c.name].current_version,
                                 tuple(observed[c.name].consumers)) for c in creds]
            start = start_of(chain, run_id, "rotate", [pre, *the_plan.steps], members,
                             session.lease.holder)
            journal = session.open_journal("run.start", start.to_json())
            journal.append("step.start", step=pre, data={})
            journal.append("step.done", step=pre, data={
                "detail": f"{passed} checks passed", "seconds": seconds,
                "traps": [t.name for t in the_plan.traps]})
            session.execute(start, observer, cancel,
                            lambda executor: executor.execute(the_plan.steps),
                            observed_by=observed, values=candidates)
            return report_from(session.finish())

    def resume(self, options: Options, state: journal_mod.RunState, observer: Observer,
               cancel: CancelToken) -> RunReport:
        """Continue the run as one unit: every credential's steps left, in the merged order."""
        from rotate.engine.executor import report_from
        from rotate.engine.resumption import resume_steps

        chain = self.load_chain(options)
        creds = tuple(chain.credential(n) for n in state.start.credentials)
        adapters = self.adapters(chain, options, *creds)
        with self.session(chain, creds[0], adapters, options, state.run_id,
                          reclaim_run=state.run_id, members=creds) as session:
            session.open_journal("run.resume", {"holder": session.lease.holder})
            session.execute(state.start, observer, cancel,
                            lambda executor: resume_steps(state, executor))
            final = session.finish()
            if final.operation == "rollback" and final.status == "succeeded":
                mark_rolled_back(session.runs, final.start.of_run, state.run_id)
            return report_from(journal_mod.load(options.state_dir, state.run_id))

    def rollback(self, options: Options, orig: journal_mod.RunState, observer: Observer,
                 cancel: CancelToken) -> RunReport:
        """Every credential the run changed put back, as one rollback run of them all: each
        one's rollback steps (rotate.engine.rollback), merged as a rotation's are.  Refused
        as a whole (exit 3, nothing changed) when anything any of them would restore moved
        since the run, unless ``--force``."""
        from rotate.engine.executor import report_from
        from rotate.engine.kinds import undo_of
        from rotate.engine.merge import member_state, merge_drafts, number
        from rotate.engine.plan import ordered_drafts
        from rotate.engine.rollback import backend_written, guard, rollback_input

        chain = self.load_chain(options)
        creds = tuple(chain.credential(n) for n in orig.start.credentials)
        adapters = self.adapters(chain, options, *creds)
        rb_id = new_run_id(orig.credential)
        with self.session(chain, creds[0], adapters, options, rb_id, reclaim_run=orig.run_id,
                          members=creds) as session:
            members: list[Member] = []
            drafted: list[tuple[str, Any]] = []
            for cred in creds:
                mine = member_state(orig, cred.name)
                written_from = backend_written(adapters.vault, cred, mine)
                got = rollback_input(chain, cred, mine, written_from)
                if got is None or written_from is None:
                    members.append(member_of(chain, cred, mine.strategy, written_from, ()))
                    continue
                kinds, inp = got
                assert inp.restore is not None
                restore = guard(chain, cred, adapters, mine, written_from, inp.restore, options,
                                session.runs)
                drafted.append((cred.name, ordered_drafts(kinds, inp)))
                members.append(Member(
                    cred.name, backend_target(chain, cred).split("#")[0], written_from,
                    inp.consumers, tuple(str(p) for p in cred.providers),
                    restore.backend_version, dict(restore.config_versions),
                    dict(restore.config_match), mine.strategy))
            order = undo_of({(st.step.kind, st.step.phase) for st in orig.steps})
            steps = number(merge_drafts(drafted, order))
            start = start_of(chain, rb_id, "rollback", steps, members, session.lease.holder,
                             of_run=orig.run_id)
            journal = session.open_journal("run.start", start.to_json())
            if not steps:
                journal.append("run.end", data={
                    "status": "succeeded", "exit_code": 0,
                    "message": f"run {orig.run_id} never wrote a value; nothing to roll back"})
            else:
                session.execute(start, observer, cancel,
                                lambda executor: executor.execute(steps))
            final = session.finish()
            if final.status == "succeeded":
                mark_rolled_back(session.runs, orig.run_id, rb_id)
            return report_from(final)
