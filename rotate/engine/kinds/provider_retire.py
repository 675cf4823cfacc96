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
from rotate.stages import provider_apply as stage


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
        for applied in pl.live(inp.credential):
            key = str(applied.provider)
            what = ("ACL SETUSER … <(old)" if applied.method == "redis-acl"
                    else "NOLOGIN on the role the consumers left")
            yield Draft(key, f"{applied.method}: {what}", key)

    def observe(self, run: Run, io: StepIO) -> Outcome[Applied] | None:
        return None  # act observes the provider itself before changing it

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        accounts, old, new = pl.rotation_values(run, applied)
        probe = pl.probe(run, applied)
        if applied.method == "redis-acl":
            with pl.redis_admin(run, applied, new, old) as redis:
                change = stage.redis_retire(redis, probe, accounts, old)
        else:
            with pl.postgres_admin(run, applied, new, old) as pg:
                change = stage.postgres_retire(pg, probe, accounts, old)
        return Outcome(Applied(applied.method, accounts.old, change.changed), change.detail)

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
        for applied in pl.live(inp.credential):
            if applied.method == "postgres" and applied.users is None:
                continue  # restoring the verifier was the cut
            key = str(applied.provider)
            yield Draft(key, f"{applied.method}: the replaced value valid nowhere", key)

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        accounts, restored, replaced = pl.rollback_values(run, applied)
        probe = pl.probe(run, applied)
        if applied.method == "redis-acl":
            with pl.redis_admin(run, applied, restored, replaced) as redis:
                change = stage.redis_retire(redis, probe, stage.Accounts(accounts.new,
                                                                         accounts.new),
                                            replaced)
        elif accounts.alternating:
            with pl.postgres_admin(run, applied, restored, replaced) as pg:
                change = stage.postgres_retire(pg, probe, stage.Accounts(accounts.old,
                                                                         accounts.new),
                                               replaced)
        else:
            return Outcome(Applied(applied.method, accounts.new, False), "nothing to retire")
        return Outcome(Applied(applied.method, accounts.new, change.changed), change.detail)

    def prove(self, run: Run, io: StepIO, acted: Outcome[Applied]) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        accounts, restored, replaced = pl.rollback_values(run, applied)
        detail = stage.prove_accepts(pl.probe(run, applied), applied, accounts.old, restored,
                                     refused=(accounts.new, replaced),
                                     protocol=pl.protocol(applied), deadline=run.deadline())
        return Outcome(acted.data, f"{acted.detail}; {detail}")
