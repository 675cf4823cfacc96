"""③ ``provider.wait``: each provider's rollout complete (OnDelete: its pods replaced)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import ITSELF, Draft, PlanInput, Run, StepData, StepKind, Told
from rotate.engine.kinds.provider_restart import ProviderRestart, ProviderRestartRetire
from rotate.engine.kinds.rolling import RestartKind, RolledOut, WaitKind
from rotate.engine.model import Phase
from rotate.stages.rollout import ONDELETE_ACTION


class ProviderWait(WaitKind):
    name: ClassVar[str] = "provider.wait"
    stage: ClassVar[int] = 3
    exit_code: ClassVar[int] = 12
    result: ClassVar[type[StepData]] = RolledOut
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    restarted_by: ClassVar[type[RestartKind]] = ProviderRestart
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.PROVIDER_ROLLED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)  # proves only: a Warning when it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for ref in inp.credential.providers:
            if inp.credential.apply_of(ref).live:
                continue  # provider.apply changes it in place
            key = str(ref)
            yield Draft(key, ONDELETE_ACTION[ref.kind] if key in inp.observed.ondelete
                        else "rollout status", key)


class ProviderWaitRetire(ProviderWait):
    phase: ClassVar[Phase] = "retire"
    restarted_by: ClassVar[type[RestartKind]] = ProviderRestartRetire

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.previous_key_overlap:
            for ref in inp.credential.providers:
                if inp.credential.apply_of(ref).live:
                    continue
                yield Draft(str(ref), "rollout status", str(ref))
