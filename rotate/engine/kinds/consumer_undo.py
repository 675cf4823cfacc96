"""④ ``consumer.undo``: a prepared ``consumer.restart`` taken back within the run.

Never planned: the executor adds it when the stage a rollout was prepared ahead of fails
(rotate.engine.undo).  Like ``kubectl rollout undo``, it puts the pod template back as it
was — the ``restartedAt`` recorded before the restart (absent: removed) — so the template
equals the old ReplicaSet's again: the controller scales the new, unready pods away and the
old ones, which never stopped serving, stay.  The workload's ``rotate.dev/run-id`` becomes
``<run id>.undone``, so a resume restarts it afresh instead of taking it for done.  Then it
waits for that rollout to settle.  ``io.prior["undoes"]`` holds the journaled data of the
``consumer.restart`` step it undoes (``previous_stamp``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.errors import StepFailed
from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import Draft, Outcome, PlanInput, Run, StepData, StepIO, StepKind
from rotate.engine.kinds.rolling import RolledOut
from rotate.engine.targets import workload_ref
from rotate.stages import rollout

UNDONE = "undone"


def _template_annotations(now: Mapping[str, str], undoes: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch of the template's metadata that makes it what it was: the earlier
    ``restartedAt``, or none — and no ``annotations`` at all when the template had none and
    nothing else was added since (a template with an empty map is another template to a
    controller that compares them as written)."""
    previous = undoes["previous_stamp"]
    if previous is None and not undoes.get("annotated", True) and set(now) <= {
            rollout.RESTARTED_AT}:
        return {"annotations": None}
    return {"annotations": {rollout.RESTARTED_AT: previous}}


class ConsumerUndo(StepKind[RolledOut]):
    name: ClassVar[str] = "consumer.undo"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 15
    parallel: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = RolledOut
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()
    undone_words: ClassVar[str | None] = "the rollouts of {} settled back on their old pods"
    event_reason: ClassVar[str | None] = "RolloutUndone"

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        return ()  # added by the executor, never planned

    def observe(self, run: Run, io: StepIO) -> Outcome[RolledOut] | None:
        return None  # the patch is idempotent: the same template gives the same generation

    def act(self, run: Run, io: StepIO) -> Outcome[RolledOut]:
        undoes = io.prior.get("undoes") or {}
        if "previous_stamp" not in undoes:
            raise StepFailed(f"the journal holds no earlier pod template of {io.step.target}; "
                             "nothing to undo from")
        ref = self.ref(run, io.step.subject)
        kube = run.adapters.kube
        body = {
            "metadata": {"annotations": {rollout.RUN_ID_ANNOTATION: f"{run.run_id}.{UNDONE}"}},
            "spec": {"template": {"metadata": _template_annotations(
                rollout.template_annotations(kube.get(ref.kind, ref.namespace, ref.name)),
                undoes)}},
        }
        obj = kube.patch(ref.kind, ref.namespace, ref.name, body, patch_type="merge")
        gen = rollout.generation(obj)
        return Outcome(RolledOut(gen), f"pod template back as before (generation {gen})")

    def ref(self, run: Run, subject: str) -> ObjectRef:
        """The workload whose pod template a step on ``subject`` puts back."""
        return workload_ref(run.service(subject))

    def prove(self, run: Run, io: StepIO, acted: Outcome[RolledOut]) -> Outcome[RolledOut]:
        ref = self.ref(run, io.step.subject)
        message = rollout.wait_rollout(run.adapters.kube, ref, acted.data.generation,
                                       deadline=run.deadline(), cancel=run.cancel)
        return Outcome(acted.data, f"{acted.detail}; {message}")
