"""④ ``consumer.wait``: each consumer's rollout complete."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rotate.engine.kinds.base import Draft, PlanInput, StepData, StepKind
from rotate.engine.kinds.consumer_restart import ConsumerRestart
from rotate.engine.kinds.rolling import RestartKind, RolledOut, WaitKind
from rotate.engine.targets import workload_ref


class ConsumerWait(WaitKind):
    name: ClassVar[str] = "consumer.wait"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 15
    parallel: ClassVar[bool] = True
    lane: ClassVar[str | None] = "finish"
    result: ClassVar[type[StepData]] = RolledOut
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()
    restarted_by: ClassVar[type[RestartKind]] = ConsumerRestart

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            yield Draft(str(workload_ref(svc)), "rollout status", svc.name)


ConsumerWait.undo = (ConsumerWait,)
