"""④ ``consumer.restart``: roll each consumer so it reads its new document and token.

Under the restart strategy this is a *prepared* step (base.py ``prepares``): it runs before
the provider switches, so the new pods start while the provider still refuses their value —
unready, the old pods serving — and become Ready once it accepts it.  A workload whose old
pods would go first (Recreate, OnDelete, maxUnavailable ≥ replicas) is planned ``late``,
after the switch, as before.  The pod template's previous ``restartedAt`` is recorded before
the patch: ``consumer.undo`` puts it back (``kubectl rollout undo``) if the provider fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds.base import Draft, Outcome, PlanInput, Run, StepData, StepIO, StepKind
from rotate.engine.kinds.rolling import Restarted, RestartKind
from rotate.engine.targets import workload_ref
from rotate.stages import rollout
from rotate.stages.rollout import ONDELETE_ACTION


def _detail(inp: PlanInput, ref: str, kind: str) -> tuple[str, bool]:
    """(what the step does, whether it waits for the provider's switch)."""
    if ref in inp.ondelete:
        return ONDELETE_ACTION[kind], inp.prepare_first
    if not inp.prepare_first:
        return "set restartedAt on the pod template", False
    if ref in inp.no_surge:
        return f"set restartedAt on the pod template; {inp.no_surge[ref]}", True
    detail = ("set restartedAt before the provider switches: new pods wait unready, old pods "
              "serve")
    if inp.thinned.get(ref):
        detail += f" ({inp.thinned[ref]})"
    return detail, False


class ConsumerRestart(RestartKind):
    name: ClassVar[str] = "consumer.restart"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 15
    parallel: ClassVar[bool] = True
    prepares: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = Restarted
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            ref = workload_ref(svc)
            detail, late = _detail(inp, str(ref), ref.kind)
            yield Draft(str(ref), detail, svc.name, late=late)

    def ref(self, run: Run, subject: str) -> ObjectRef:
        return workload_ref(run.service(subject))

    def act(self, run: Run, io: StepIO) -> Outcome[Restarted]:
        if "previous_stamp" not in io.prior:
            ref = self.ref(run, io.step.subject)
            obj = run.adapters.kube.get(ref.kind, ref.namespace, ref.name)
            meta = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
            io.record(previous_stamp=rollout.template_annotations(obj).get(
                rollout.RESTARTED_AT), annotated="annotations" in meta)
        return super().act(run, io)


ConsumerRestart.undo = (ConsumerRestart,)
