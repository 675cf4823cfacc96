"""③ ``provider.apply``: a provider that holds its own password is changed over an admin
connection (``apply: redis-acl | postgres``), in place of ``provider.restart``/``wait``.

Per method and strategy (docs/chain-file.md "Provider apply methods"): redis-acl restart =
``resetpass >new``, overlap = ``>new`` (both valid); postgres = the new SCRAM verifier on the
role (overlap: on the inactive one of the alternating users, plus ``LOGIN``).  Every act
observes from outside first and does nothing when the provider already is in the target
state, so a resumed run repeats the step safely.  The proof is ``provider.verify``'s.

The rollback form (phase ``restore``) only makes the restored value valid again — ``>old``,
the old verifier, or ``LOGIN`` on the old role — so consumers still on the rolled-back value
keep working while they move back; :class:`~rotate.engine.kinds.provider_retire.RetireReplaced`
removes that value at the end of the rollback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.chain.model import ProviderApply
from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds import provider_live as pl
from rotate.engine.kinds.base import (
    BEGUN_UNFINISHED,
    PLANNED,
    Draft,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
    Told,
    later,
)
from rotate.engine.kinds.provider_live import Applied
from rotate.engine.kinds.provider_retire import RetireReplaced
from rotate.engine.model import Phase
from rotate.stages import provider_apply as stage

__all__ = ["Applied", "ApplyLive", "ApplyRestore"]


def _detail(applied: ProviderApply, overlap: bool) -> str:
    if applied.method == "redis-acl":
        user = applied.user or "default"
        return (f"ACL SETUSER {user} >(new): old and new both valid" if overlap else
                f"ACL SETUSER {user} resetpass >(new): immediate swap")
    if applied.users is not None and overlap:
        return (f"inactive one of {applied.users[0]}/{applied.users[1]}: SCRAM verifier of the "
                "new value, LOGIN")
    return "ALTER ROLE … PASSWORD (SCRAM-SHA-256 verifier of the new value)"


class ApplyLive(StepKind[Applied]):
    name: ClassVar[str] = "provider.apply"
    stage: ClassVar[int] = 3
    exit_code: ClassVar[int] = 12
    result: ClassVar[type[StepData]] = Applied
    #: a rollback makes the restored value valid again, and at its end the replaced one
    #: valid nowhere
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = later(
        lambda: (ApplyRestore, RetireReplaced))
    event_reason: ClassVar[str | None] = "ProviderApplied"
    #: planned: the provider is changed live, never rolled; begun and unfinished: it may
    #: have been changed
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {
        PLANNED: (Told.PROVIDER_LIVE,), "done": (Told.PROVIDER_APPLIED,),
        **{status: (Told.PROVIDER_MAY_BE_APPLIED,) for status in BEGUN_UNFINISHED}}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)  # the workload whose server it changed

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for applied in pl.live(inp.credential):
            key = str(applied.provider)
            yield Draft(key, f"{applied.method}: {_detail(applied, inp.overlap)}", key)

    def observe(self, run: Run, io: StepIO) -> Outcome[Applied] | None:
        return None  # act observes the provider itself (a fresh AUTH/login) before changing it

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        accounts, old, new = pl.rotation_values(run, applied)
        probe = pl.probe(run, applied)
        if applied.method == "redis-acl":
            with pl.redis_admin(run, applied, old, new) as redis:
                change = stage.redis_apply(redis, probe, accounts, old, new,
                                           str(run.start.strategy))
        else:
            with pl.postgres_admin(run, applied, old, new) as pg:
                if "could_login" not in io.prior:
                    io.record(**stage.postgres_before(pg, accounts))
                change = stage.postgres_apply(pg, probe, accounts, new)
        return Outcome(Applied(applied.method, accounts.new, change.changed), change.detail)

    def prove(self, run: Run, io: StepIO, acted: Outcome[Applied]) -> Outcome[Applied]:
        return acted  # provider.verify proves it from outside


class ApplyRestore(ApplyLive):
    """A rollback: the restored value valid again on the provider (nothing removed yet)."""

    phase: ClassVar[Phase] = "restore"
    event_reason: ClassVar[str | None] = "ProviderRestored"

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.restore is None:
            return
        for applied in pl.live(inp.credential):
            key = str(applied.provider)
            yield Draft(key, f"{applied.method}: the restored value valid again "
                        "(the replaced one stays valid until the consumers moved back)", key)

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        accounts, restored, replaced = pl.rollback_values(run, applied)
        probe = pl.probe(run, applied)
        if applied.method == "redis-acl":
            with pl.redis_admin(run, applied, replaced, restored) as redis:
                change = stage.redis_undo_retire(redis, probe, accounts, restored)
        elif accounts.alternating:
            with pl.postgres_admin(run, applied, replaced, restored) as pg:
                change = stage.postgres_undo_retire(pg, probe, accounts, restored)
        else:
            with pl.postgres_admin(run, applied, replaced, restored) as pg:
                change = stage.postgres_undo_apply(pg, probe, accounts, restored, {})
        return Outcome(Applied(applied.method, accounts.old, change.changed), change.detail)
