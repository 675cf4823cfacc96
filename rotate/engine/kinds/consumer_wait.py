"""④ ``consumer.wait``: each consumer's rollout complete."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import ITSELF, Draft, PlanInput, Run, StepData, StepKind, Told
from rotate.engine.kinds.consumer_restart import ConsumerRestart
from rotate.engine.kinds.rolling import RestartKind, RolledOut, WaitKind
from rotate.engine.targets import workload_ref


class ConsumerWait(WaitKind):
    name: ClassVar[str] = "consumer.wait"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 15
    parallel: ClassVar[bool] = True
    lane: ClassVar[str | None] = "finish"
    one_per_consumer: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = RolledOut
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    restarted_by: ClassVar[type[RestartKind]] = ConsumerRestart
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.CONSUMER_ROLLED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)  # proves only: a Warning if it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            yield Draft(str(workload_ref(svc)), "rollout status", svc.name)
