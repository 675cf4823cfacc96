"""② ``sync.trigger``: ask ESO to sync now (force-sync annotation), noting when, and how each
provider looked before (a reloader's roll is told apart from ours by it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.core.timestamps import rfc3339
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
)
from rotate.stages import rollout, sync


@dataclass(frozen=True)
class SyncTriggered(StepData):
    stamp: str
    trigger_time: str  # RFC 3339, the API server's clock
    baselines: Mapping[str, Any]  # provider ref → rollout.Baseline JSON

    def baseline(self, ref: str) -> rollout.Baseline | None:
        base = self.baselines.get(ref)
        return rollout.Baseline.from_json(base) if base else None


def trigger(run: Run) -> SyncTriggered:
    """Note each provider's baseline, then annotate the ExternalSecret."""
    kube = run.adapters.kube
    baselines = {str(ref): rollout.baseline(kube.get(ref.kind, ref.namespace, ref.name)).to_json()
                 for ref in run.credential.providers}
    es = run.credential.external_secret
    trig = sync.trigger(kube, es.namespace, es.name, run.run_id)
    return SyncTriggered(trig.stamp, rfc3339(trig.at), baselines)


def trigger_other(run: Run, subject: str) -> SyncTriggered:
    """Annotate a further ExternalSecret of the path (``ns/name``): no provider baselines,
    the chain's own trigger notes them."""
    ns, name = subject.split("/", 1)
    trig = sync.trigger(run.adapters.kube, ns, name, run.run_id)
    return SyncTriggered(trig.stamp, rfc3339(trig.at), {})


def external_secret_of(run: Run, subject: str) -> list[ObjectRef]:
    """The ExternalSecret a sync step on ``subject`` acts on ("": the chain's own)."""
    if not subject:
        return objects.external_secret(run)
    ns, _, name = subject.partition("/")
    return [ObjectRef("ExternalSecret", ns, name)] if name else []


class SyncTrigger(StepKind[SyncTriggered]):
    name: ClassVar[str] = "sync.trigger"
    stage: ClassVar[int] = 2
    exit_code: ClassVar[int] = 11
    result: ClassVar[type[StepData]] = SyncTriggered
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    event_reason: ClassVar[str | None] = "SyncRequested"
    syncs_external_secret: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return external_secret_of(run, subject)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        yield Draft(inp.credential.external_secret.short, "annotate force-sync=<run id + stamp>")
        for short in inp.observed.external_secrets:  # further ExternalSecrets of the path
            yield Draft(short, "annotate force-sync=<run id + stamp> (another ExternalSecret "
                        "of the path)", short)

    def observe(self, run: Run, io: StepIO) -> Outcome[SyncTriggered] | None:
        return None  # a fresh trigger every attempt: the wait needs one ESO has not answered

    def act(self, run: Run, io: StepIO) -> Outcome[SyncTriggered]:
        subject = io.step.subject
        triggered = trigger_other(run, subject) if subject else trigger(run)
        return Outcome(triggered, f"force-sync={triggered.stamp}")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[SyncTriggered]) -> Outcome[SyncTriggered]:
        return acted  # the proof is sync.wait's
