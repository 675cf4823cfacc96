"""③ ``provider.retire`` (overlap phase 2 of a live method): once every consumer moved, the
old value becomes valid nowhere on the provider — redis-acl ``<old`` (the user keeps only the
new password), postgres alternating users ``NOLOGIN`` on the role the consumers left (its
verifier is kept; sessions still open are reported, never ended).  ``provider.verify``
(phase ``retire``) then proves the old value refused.

The rollback form (phase ``restore``, planned as the undo of ``provider.apply``) runs last in
a rollback, after the consumers moved back: the value the rollback replaced is removed the
same way (``<replaced``; ``NOLOGIN`` on the role the rolled-back run moved to), and proven
refused.  A single PostgreSQL role needs none: restoring its verifier already was the cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds import provider_live as pl
from rotate.engine.kinds.base import (
    PLANNED,
    Draft,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
    Told,
)
from rotate.engine.kinds.provider_live import Applied
from rotate.engine.model import Phase
from rotate.providers import Change
from rotate.providers.proof import prove_accepts


class RetireLive(StepKind[Applied]):
    name: ClassVar[str] = "provider.retire"
    stage: ClassVar[int] = 3
    exit_code: ClassVar[int] = 12
    result: ClassVar[type[StepData]] = Applied
    #: ApplyRestore (the undo of provider.apply) makes the old value valid again
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()
    event_reason: ClassVar[str | None] = "PreviousValueRetired"
    #: planned: the provider holds both values until the step is done
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {
        PLANNED: (Told.PROVIDER_RETIRING,), "done": (Told.PROVIDER_RETIRED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if not inp.overlap:
            return
        for applied, method in pl.live(inp.credential):
            key = str(applied.provider)
            yield Draft(key, f"{applied.method}: {method.describe_retire(applied)}", key)

    def observe(self, run: Run, io: StepIO) -> Outcome[Applied] | None:
        return None  # act observes the provider itself before changing it

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        target = pl.rotation_target(run, applied)
        found = pl.reach(run, applied)
        with pl.admin(run, found, target.new, target.old) as admin:
            change = found.method.retire(admin, found.probe, target)
        return Outcome(Applied(applied.method, target.accounts.old, change.changed),
                       change.detail)

    def prove(self, run: Run, io: StepIO, acted: Outcome[Applied]) -> Outcome[Applied]:
        return acted  # provider.verify (retire) proves it


class RetireReplaced(RetireLive):
    """The end of a rollback: the value it replaced is valid nowhere on the provider."""

    phase: ClassVar[Phase] = "restore"
    rollback_last: ClassVar[bool] = True
    event_reason: ClassVar[str | None] = "ReplacedValueRetired"

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.restore is None:
            return
        for applied, method in pl.live(inp.credential):
            if not method.retires_replaced(applied):
                continue  # e.g. one role: restoring its verifier was the cut
            key = str(applied.provider)
            yield Draft(key, f"{applied.method}: the replaced value valid nowhere", key)

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        """The replaced value removed, then proven refused with the restored one accepted:
        both on the attempt's one reach of the provider (its Service read once)."""
        applied = pl.applied_of(run, io.step.subject)
        target = pl.rollback_target(run, applied)  # old: restored, new: replaced
        found = pl.reach(run, applied)
        change = Change(False, "nothing to retire")
        pl.refuse_unfit(run, found, target)
        with pl.restore_refused(run, applied):
            if found.method.retires_replaced(applied):
                with pl.admin(run, found, target.old, target.new) as admin:
                    change = found.method.retire_replaced(admin, found.probe, target)
            proof = prove_accepts(found.probe, applied, target.accounts.old, target.old,
                                  refused=(target.accounts.new, target.new),
                                  deadline=run.deadline())
        return Outcome(Applied(applied.method, target.accounts.new, change.changed),
                       f"{change.detail}; {proof}")

    def prove(self, run: Run, io: StepIO, acted: Outcome[Applied]) -> Outcome[Applied]:
        return acted  # act proved it on the same reach
