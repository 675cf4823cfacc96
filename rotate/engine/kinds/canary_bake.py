"""④ ``canary.bake``: the canary, moved alone as the first wave, watched for its bake time
before any later wave moves (chain-file.md "waves", "canary"; rotate.stages.bake).

Forwards: watch the canary's signals — its workloads' pods ready, its services' readyz, the
chain's PromQL query under its ``max`` — for the whole bake.  Backwards: nothing (it only
watches; a rollback restores the canary through the consumer kinds' own undo).  It never
observes an earlier attempt as done: a resume after a failed bake bakes again, so a fix is
proven before the next wave moves.

Who the canary is comes from the journal, not the chain file: the consumers whose
stage-④ steps the plan put before this step; the later waves, the
ones after it.  A failure (exit 19) says which signal failed and how, that only the canary
moved, and the two ways on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rotate.chain.waves import waves_of, with_canary
from rotate.core.errors import EXIT_CANARY_FAILED, StepFailed
from rotate.engine.kinds.base import (
    Draft,
    NoData,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
)
from rotate.engine.kinds.config_harvest import names_in_short
from rotate.engine.next_commands import resume_command, rollback_command
from rotate.engine.targets import parse_workload, workload_ref
from rotate.stages import bake, readyz


class CanaryBake(StepKind[NoData]):
    name: ClassVar[str] = "canary.bake"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = EXIT_CANARY_FAILED
    result: ClassVar[type[StepData]] = NoData
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()  # watches only
    undoes_prepared: ClassVar[bool] = False
    divides_waves: ClassVar[bool] = True

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        canary = inp.credential.canary
        if canary is None or inp.restore is not None:
            return
        waves = with_canary(waves_of(inp.credential.waves, inp.wave_members), canary)
        if not waves:
            return
        signals = "pods ready, readyz 200"
        if canary.query is not None:
            signals += f", `{canary.query.expr}` <= {canary.query.max:g}"
        yield Draft(f"canary {names_in_short(list(waves[0]))}",
                    f"bake {canary.bake:g}s: {signals}")

    def observe(self, run: Run, io: StepIO) -> Outcome[NoData] | None:
        return None  # a resume bakes again: the fix must hold before the next wave

    def act(self, run: Run, io: StepIO) -> Outcome[NoData]:
        return Outcome(NoData(), "")  # changes nothing: only watches

    def prove(self, run: Run, io: StepIO, acted: Outcome[NoData]) -> Outcome[NoData]:
        canary, later = split_at(run, io.step.index)
        cfg = run.credential.canary
        seconds = cfg.bake if cfg is not None else 0.0
        verdict = bake.bake(self._signals(run, canary), seconds, run.cancel)
        names = ", ".join(canary)
        if verdict.failed is None:
            return Outcome(NoData(), f"canary {names} held {verdict.seconds:.0f}s "
                                     f"({verdict.checks} checks)")
        raise StepFailed(
            f"the canary {names} failed its bake after {verdict.seconds:.0f}s of "
            f"{seconds:g}s: {verdict.failed}",
            next_step=(f"Only the canary moved ({names}); the later waves "
                       f"({', '.join(later) or 'none'}) are untouched, on the old value, which "
                       "the provider still accepts. Roll the canary back with "
                       f"`{rollback_command(run.run_id)}`, or fix the cause and resume with "
                       f"`{resume_command(run.run_id)}` (it bakes the canary again, then moves "
                       "the next waves); add the same --chain/--state-dir options as this run."))

    @staticmethod
    def _signals(run: Run, canary: list[str]) -> list[bake.Signal]:
        signals: list[bake.Signal] = []
        for name in canary:
            if name in run.chain.services:
                svc = run.service(name)
                signals.append(bake.pods_signal(run.adapters.kube, workload_ref(svc)))
                signals.append(bake.readyz_signal(run.adapters.readyz, readyz.target_for(svc)))
            else:
                signals.append(bake.pods_signal(run.adapters.kube, parse_workload(name)))
        query = run.credential.canary.query if run.credential.canary is not None else None
        if query is not None:
            url = query.resolve_url(run.environ)
            if not url or run.adapters.metrics is None:
                raise StepFailed(f"the canary's query has no Prometheus to ask: set "
                                 f"{query.url_env or 'canary.query.prometheus.url'}")
            signals.append(bake.query_signal(run.adapters.metrics, url, query.expr, query.max))
        return signals


def split_at(run: Run, index: int) -> tuple[list[str], list[str]]:
    """The canary (the consumers whose stage-④ steps the plan put before step ``index``)
    and the later waves' consumers (after it), each in plan order.  A consumer's steps have
    its name or its workload ref as subject; the harvest's has none."""
    before: dict[str, None] = {}
    after: dict[str, None] = {}
    for step in run.start.steps:
        if step.phase == "main" and step.stage == 4 and step.subject:
            (before if step.index < index else after)[step.subject] = None
    return list(before), [n for n in after if n not in before]
