"""③ ``provider.restart``: roll each provider so it reads the new value (phase 2 of the
overlap strategy rolls it once more, to drop the previous value)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rotate.core.durations import format_duration
from rotate.core.refs import ObjectRef
from rotate.engine.kinds.base import Draft, PlanInput, Run, StepData, StepKind
from rotate.engine.kinds.rolling import Restarted, RestartKind
from rotate.engine.kinds.sync_trigger import SyncTrigger
from rotate.engine.kinds.sync_wait import SyncWaitRetire
from rotate.engine.model import Phase
from rotate.engine.targets import parse_workload


class ProviderRestart(RestartKind):
    name: ClassVar[str] = "provider.restart"
    stage: ClassVar[int] = 3
    exit_code: ClassVar[int] = 12
    result: ClassVar[type[StepData]] = Restarted
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()
    baselines_from: ClassVar[type[StepKind[Any]] | None] = SyncTrigger

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        grace = format_duration(inp.chain.defaults.reloader_grace)
        for ref in inp.credential.providers:
            if inp.credential.apply_of(ref).live:
                continue  # provider.apply changes it in place
            key = str(ref)
            if key in inp.reloader:
                detail = (f"{inp.reloader[key]} watches the Secret: wait {grace} for its "
                          "rollout, roll only if it does not come")
            else:
                detail = "set restartedAt (sub-second) on the pod template"
            yield Draft(key, detail, key)

    def ref(self, run: Run, subject: str) -> ObjectRef:
        return parse_workload(subject)


class ProviderRestartRetire(ProviderRestart):
    phase: ClassVar[Phase] = "retire"
    baselines_from: ClassVar[type[StepKind[Any]] | None] = SyncWaitRetire

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.previous_key_overlap:
            for ref in inp.credential.providers:
                if inp.credential.apply_of(ref).live:
                    continue
                yield Draft(str(ref), "set restartedAt: drop the previous value", str(ref))


ProviderRestart.undo = (ProviderRestart,)
ProviderRestartRetire.undo = (ProviderRestartRetire,)
