"""④ ``consumer.restart``: roll each consumer so it reads its new document and token."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds.base import Draft, PlanInput, Run, StepData, StepKind
from rotate.engine.kinds.rolling import Restarted, RestartKind
from rotate.engine.targets import workload_ref
from rotate.stages.rollout import ONDELETE_ACTION


class ConsumerRestart(RestartKind):
    name: ClassVar[str] = "consumer.restart"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 15
    parallel: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = Restarted
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            ref = workload_ref(svc)
            yield Draft(str(ref), ONDELETE_ACTION[ref.kind] if str(ref) in inp.ondelete
                        else "set restartedAt on the pod template", svc.name)

    def ref(self, run: Run, subject: str) -> ObjectRef:
        return workload_ref(run.service(subject))


ConsumerRestart.undo = (ConsumerRestart,)
