"""③/④ What restart and wait kinds share: roll a workload once per run (per phase), then
wait until the rollout is complete.  Concrete kinds say which workload and how it is
described (provider_*.py, consumer_*.py)."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds.base import Outcome, Run, StepData, StepIO, StepKind, omit_none
from rotate.stages import rollout

#: Suffix of the restart mark of overlap phase 2: it rolls the same workload a second time,
#: so it is marked with its own id, or a resumed run would take phase 1's mark for "already
#: restarted" and never roll again.
RETIRE_MARK = "retire"


@dataclass(frozen=True)
class Restarted(StepData):
    generation: int
    via: str  # "rotate" | "already" (an earlier attempt) | "reloader"
    stamp: str | None = omit_none()


@dataclass(frozen=True)
class RolledOut(StepData):
    generation: int


class RestartKind(StepKind[Restarted]):
    """Set restartedAt on the pod template, once per run; a provider watched by another
    reloader is given ``reloader_grace`` to roll by itself first."""

    #: a provider may be rolled by a reloader (and its baseline was noted by this kind)
    baselines_from: ClassVar[type[StepKind[Any]] | None] = None

    @abstractmethod
    def ref(self, run: Run, subject: str) -> ObjectRef:
        """The workload a step on ``subject`` rolls."""

    def _marker(self, run: Run) -> str:
        return f"{run.run_id}.{RETIRE_MARK}" if self.phase == "retire" else run.run_id

    #: the workload as this attempt's ``observe`` read it; ``act`` uses it instead of
    #: reading it again (an attempt is observe → act, moments apart; a retry observes anew)
    seen: dict[str, Any] | None = None

    def observe(self, run: Run, io: StepIO) -> Outcome[Restarted] | None:
        ref = self.ref(run, io.step.subject)
        self.seen = run.adapters.kube.get(ref.kind, ref.namespace, ref.name)
        already = rollout.restart_of(self.seen, self._marker(run))
        if already is None:
            return None
        return Outcome(Restarted(already.generation, "already", already.stamp or None),
                       f"already restarted by this run (generation {already.generation})")

    def act(self, run: Run, io: StepIO) -> Outcome[Restarted]:
        kube, ref = run.adapters.kube, self.ref(run, io.step.subject)
        if self.baselines_from is not None:
            came = self._reloader(run, ref)
            if came is not None:
                return came
        # a provider may have waited for a reloader's grace since observe: read it anew
        seen = self.seen if self.baselines_from is None else None
        r = rollout.restart(kube, ref, self._marker(run), seen=seen)
        return Outcome(Restarted(r.generation, r.via, r.stamp),
                       f"restartedAt={r.stamp} (generation {r.generation})")

    def _reloader(self, run: Run, ref: ObjectRef) -> Outcome[Restarted] | None:
        """The roll another reloader made for this run, if any (provider_restart.py)."""
        return None

    def prove(self, run: Run, io: StepIO, acted: Outcome[Restarted]) -> Outcome[Restarted]:
        return acted  # the rollout's proof is the wait kind's


class WaitKind(StepKind[RolledOut]):
    """Until the rollout the restart kind started is complete (OnDelete workloads: their pods
    deleted one by one, each replacement Ready)."""

    restarted_by: ClassVar[type[RestartKind]]

    def observe(self, run: Run, io: StepIO) -> Outcome[RolledOut] | None:
        return None  # waiting is idempotent: a done rollout is proven at once

    def act(self, run: Run, io: StepIO) -> Outcome[RolledOut]:
        restarted = run.result(self.restarted_by, io.step.subject)
        return Outcome(RolledOut(restarted.generation if restarted else 0), "")

    def prove(self, run: Run, io: StepIO, acted: Outcome[RolledOut]) -> Outcome[RolledOut]:
        kube = run.adapters.kube
        ref = self.restarted_by().ref(run, io.step.subject)
        gen = acted.data.generation
        obj = kube.get(ref.kind, ref.namespace, ref.name)
        if ref.kind in rollout.ONDELETE_ACTION and rollout.update_strategy(obj) == "OnDelete":
            rollout.roll_ondelete(kube, ref, gen, deadline=run.deadline(), cancel=run.cancel)
        message = rollout.wait_rollout(kube, ref, gen, deadline=run.deadline(),
                                       cancel=run.cancel)
        return Outcome(acted.data, message)

