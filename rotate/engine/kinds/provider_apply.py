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

__all__ = ["Applied", "ApplyLive", "ApplyRestore"]


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
        for applied, method in pl.live(inp.credential):
            key = str(applied.provider)
            detail = method.describe_apply(applied, overlap=inp.overlap)
            yield Draft(key, f"{applied.method}: {detail}", key)

    def observe(self, run: Run, io: StepIO) -> Outcome[Applied] | None:
        return None  # act observes the provider itself (a fresh AUTH/login) before changing it

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        target = pl.rotation_target(run, applied)
        found = pl.reach(run, applied)
        with pl.admin(run, found, target.old, target.new) as admin:
            change = found.method.apply(admin, found.probe, target, io)
        return Outcome(Applied(applied.method, target.accounts.new, change.changed),
                       change.detail)

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
        for applied, _ in pl.live(inp.credential):
            key = str(applied.provider)
            yield Draft(key, f"{applied.method}: the restored value valid again "
                        "(the replaced one stays valid until the consumers moved back)", key)

    def act(self, run: Run, io: StepIO) -> Outcome[Applied]:
        applied = pl.applied_of(run, io.step.subject)
        target = pl.rollback_target(run, applied)  # old: restored, new: replaced
        found = pl.reach(run, applied)
        pl.refuse_unfit(run, found, target)
        with pl.restore_refused(run, applied), \
                pl.admin(run, found, target.new, target.old) as admin:
            change = found.method.restore(admin, found.probe, target)
        return Outcome(Applied(applied.method, target.accounts.old, change.changed),
                       change.detail)
