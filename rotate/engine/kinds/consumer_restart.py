"""④ ``consumer.restart``: roll each consumer so it reads its new document and token.

Under the restart strategy this is a *prepared* step (base.py ``prepares``): it runs before
the provider switches, so the new pods start while the provider still refuses their value —
unready, the old pods serving — and become Ready once it accepts it.  A workload whose old
pods would go first (Recreate, OnDelete, maxUnavailable ≥ replicas) is planned ``late``,
after the switch (the plain order).  The pod template's previous ``restartedAt`` is recorded before
the patch: ``consumer.undo`` puts it back (``kubectl rollout undo``) if the provider fails.

A prepared step is proven only once its rollout is *staged* (rotate.stages.staged): the new
pods exist and have started, so the switch that follows costs the consumers a readiness
period, not a pod start.  The proof runs on resume too (an earlier attempt restarted but
may not have seen the pods start), and within the step's deadline: a new pod that never
starts fails this step before the provider switched, and the run undoes what it prepared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
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
from rotate.engine.kinds.consumer_undo import ConsumerUndo
from rotate.engine.kinds.rolling import Restarted, RestartKind
from rotate.engine.targets import workload_ref
from rotate.stages import rollout, staged
from rotate.stages.rollout import ONDELETE_ACTION

#: the plan's words when a prepared rollout's pods have no startupProbe
NO_STARTUP_PROBE = ("no startupProbe: \"started\" only means the container runs, not that "
                    "it listens")


def restart_detail(inp: PlanInput, ref: str, kind: str) -> tuple[str, bool]:
    """(what the step does, whether it waits for the provider's switch)."""
    if ref in inp.observed.ondelete:
        return ONDELETE_ACTION[kind], inp.prepare_first
    if not inp.prepare_first:
        return "set restartedAt on the pod template", False
    if ref in inp.observed.no_surge:
        return f"set restartedAt on the pod template; {inp.observed.no_surge[ref]}", True
    detail = ("set restartedAt before the provider switches, which waits until the new pods "
              "have started; they wait unready, old pods serve")
    if inp.observed.thinned.get(ref):
        detail += f" ({inp.observed.thinned[ref]})"
    if ref in inp.observed.unprobed:
        detail += f" ({NO_STARTUP_PROBE})"
    return detail, False


class ConsumerRestart(RestartKind):
    name: ClassVar[str] = "consumer.restart"
    per_wave: ClassVar[bool] = True
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 15
    parallel: ClassVar[bool] = True
    lane: ClassVar[str | None] = "prepare"
    one_per_consumer: ClassVar[bool] = True
    prepares: ClassVar[bool] = True
    #: the template was patched (or about to be) once the previous stamp was journaled
    compensate: ClassVar[type[StepKind[Any]] | None] = ConsumerUndo
    compensate_failed: ClassVar[str | None] = "previous_stamp"
    result: ClassVar[type[StepData]] = Restarted
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    event_reason: ClassVar[str | None] = "RolloutRestarted"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.CONSUMER_RESTARTED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            ref = workload_ref(svc)
            detail, late = restart_detail(inp, str(ref), ref.kind)
            yield Draft(str(ref), detail, svc.name, late=late)

    def ref(self, run: Run, subject: str) -> ObjectRef:
        return workload_ref(run.service(subject))

    def act(self, run: Run, io: StepIO) -> Outcome[Restarted]:
        if "previous_stamp" not in io.prior:
            ref = self.ref(run, io.step.subject)
            obj = self.seen if self.seen is not None else run.adapters.kube.get(
                ref.kind, ref.namespace, ref.name)
            meta = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
            io.record(previous_stamp=rollout.template_annotations(obj).get(
                rollout.RESTARTED_AT), annotated="annotations" in meta)
        return super().act(run, io)

    def observe(self, run: Run, io: StepIO) -> Outcome[Restarted] | None:
        already = super().observe(run, io)
        return None if already is None else self.prove(run, io, already)

    def prove(self, run: Run, io: StepIO, acted: Outcome[Restarted]) -> Outcome[Restarted]:
        """A prepared rollout: wait until its new pods have started (module doc)."""
        stamp = acted.data.stamp
        if not run.start.prepared(io.step) or not stamp:
            return acted
        ref = self.ref(run, io.step.subject)
        seen = staged.wait_staged(run.adapters.kube, ref, stamp, deadline=run.deadline(),
                                  cancel=run.cancel, pods=run.caches.of("Pod", ref.namespace))
        return Outcome(acted.data, f"{acted.detail}; {seen}")
