"""④ ``readyz.check``: every consumer's /readyz answers 200 (through the API server's
service proxy, or a URL)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import (
    ITSELF,
    Draft,
    NoData,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
)
from rotate.engine.targets import readyz_target
from rotate.stages import readyz


class ReadyzCheck(StepKind[NoData]):
    name: ClassVar[str] = "readyz.check"
    per_wave: ClassVar[bool] = True
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 16
    parallel: ClassVar[bool] = True
    lane: ClassVar[str | None] = "finish"
    one_per_consumer: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = NoData
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)  # proves only: a Warning if it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            yield Draft(readyz_target(svc), "until 200", svc.name)

    def observe(self, run: Run, io: StepIO) -> Outcome[NoData] | None:
        return None

    def act(self, run: Run, io: StepIO) -> Outcome[NoData]:
        return Outcome(NoData(), "")  # changes nothing: only proves

    def prove(self, run: Run, io: StepIO, acted: Outcome[NoData]) -> Outcome[NoData]:
        svc = run.service(io.step.subject)
        message = readyz.wait_ready(run.adapters.readyz, readyz.target_for(svc),
                                    deadline=run.deadline(), cancel=run.cancel)
        return Outcome(NoData(), message)
