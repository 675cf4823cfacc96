"""④ ``consumer.wait``: each consumer's rollout complete; under overlap also its old pods
gone (Terminating ones included), so ``provider.retire`` / ``backend.retire`` never cut the
old value under a pod still draining requests with it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.core.strategy import Strategy
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import (
    ITSELF,
    Draft,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
    Told,
)
from rotate.engine.kinds.consumer_restart import ConsumerRestart
from rotate.engine.kinds.rolling import RestartKind, RolledOut, WaitKind
from rotate.engine.targets import workload_ref
from rotate.stages import rollout


class ConsumerWait(WaitKind):
    name: ClassVar[str] = "consumer.wait"
    per_wave: ClassVar[bool] = True
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
            yield Draft(str(workload_ref(svc)), "rollout status" + (
                "; its old pods gone" if inp.overlap else ""), svc.name)

    def prove(self, run: Run, io: StepIO, acted: Outcome[RolledOut]) -> Outcome[RolledOut]:
        done = super().prove(run, io, acted)
        if run.start.strategy != Strategy.overlap:
            return done  # cutover: the old value is already refused everywhere
        ref = self.restarted_by().ref(run, io.step.subject)
        gone = rollout.wait_old_pods_gone(run.adapters.kube, ref, deadline=run.deadline(),
                                          cancel=run.cancel)
        return Outcome(done.data, f"{done.detail}; {gone}")
