"""④ ``workload.restart`` / ``workload.wait`` / ``workload.undo``: the workloads that read
the credential's Secret themselves (env, envFrom, a secret or projected volume), as
preflight discovered them (rotate.stages.secret_readers, engine/preflight_readers.py).

They have no document and no token: a restart is all they need, and the Secret must hold the
new value *before* their new pods start.  So under the restart strategy their restart is
prepared right after ``sync.wait`` proved the Secret (``prepares_after_sync``), not beside
it: the new pods start reading the new value while the provider still holds the old one,
wait unready, and become Ready once it switches — the same order as a Config Center
consumer's, one ESO reaction later.  A workload whose old pods would go first (Recreate,
StatefulSet, DaemonSet, OnDelete, no surge) stays after the switch (``late``).  Under
overlap they move after the provider, like every consumer.  Each step's subject is the
workload's ref (``deployment/ns/name``), so a resume or a rollback needs nothing but the
journal.  The restart, its staged proof and its undo are ``consumer.restart``'s; the wait
is ``consumer.wait``'s (rollout status: every new pod Ready).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import ITSELF, Draft, PlanInput, Run, StepKind, Told
from rotate.engine.kinds.consumer_restart import ConsumerRestart, restart_detail
from rotate.engine.kinds.consumer_undo import ConsumerUndo
from rotate.engine.kinds.consumer_wait import ConsumerWait
from rotate.engine.kinds.rolling import RestartKind
from rotate.engine.targets import parse_workload


class WorkloadUndo(ConsumerUndo):
    """A prepared ``workload.restart`` taken back when the provider fails (``consumer.undo``
    for a workload with no document)."""

    name: ClassVar[str] = "workload.undo"
    undone_words: ClassVar[str | None] = ("the rollouts of {} (reading the Secret) settled "
                                          "back on their old pods")

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)

    def ref(self, run: Run, subject: str) -> ObjectRef:
        return parse_workload(subject)


class WorkloadRestart(ConsumerRestart):
    name: ClassVar[str] = "workload.restart"
    prepares: ClassVar[bool] = False
    prepares_after_sync: ClassVar[bool] = True
    restarts_reader: ClassVar[bool] = True
    compensate: ClassVar[type[StepKind[Any]] | None] = WorkloadUndo
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.CONSUMER_RESTARTED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for ref in inp.observed.reader_restarts:
            detail, late = restart_detail(inp, ref, parse_workload(ref).kind)
            if inp.prepare_first and not late:
                detail = detail.replace("set restartedAt before the provider switches",
                                        "set restartedAt once the Secret holds the new value, "
                                        "before the provider switches")
            yield Draft(ref, f"reads the Secret; {detail}", ref, late=late)

    def ref(self, run: Run, subject: str) -> ObjectRef:
        return parse_workload(subject)


class WorkloadWait(ConsumerWait):
    name: ClassVar[str] = "workload.wait"
    restarted_by: ClassVar[type[RestartKind]] = WorkloadRestart
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)  # proves only: a Warning if it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for ref in inp.observed.reader_restarts:
            yield Draft(ref, "rollout status: every new pod Ready", ref)
