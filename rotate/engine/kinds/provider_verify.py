"""③ ``provider.verify``: proof from outside the provider — a real AUTH or login, as a consumer
connecting now would make — that it accepts the new value, for every provider with a
protocol (a live method, or ``apply: rollout`` with ``probe``).

* strategy restart (a hard cut): the new value accepted, the old one refused;
* strategy overlap, phase 1: the new value accepted, the old one still accepted;
* phase ``retire`` (after ``provider.retire`` / the second restart): the old value refused;
* phase ``restore`` (a rollback): the restored value accepted.

Runs after the provider's own step, before any consumer document is written: a provider
that restarted but still holds the old password (PostgreSQL reads it only at initdb) stops
the run here with exit 12, every consumer still on the old value, and the message names the
likely cause.  Nothing is changed, so there is nothing to undo but to prove the restored
value the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds import provider_live as pl
from rotate.engine.kinds.base import (
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
from rotate.engine.model import Phase
from rotate.providers.proof import prove, prove_accepts


@dataclass(frozen=True)
class Verified(StepData):
    account: str  # the account that logged in with the new (restored) value


class VerifyProvider(StepKind[Verified]):
    name: ClassVar[str] = "provider.verify"
    stage: ClassVar[int] = 3
    exit_code: ClassVar[int] = 12
    parallel: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = Verified
    #: a rollback proves the restored value the same way
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = later(lambda: (VerifyRestored,))
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.PROVIDER_VERIFIED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)  # proves only: a Warning when it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        old = "still accepted" if inp.overlap else "refused"
        for applied in pl.probed(inp.credential):
            key = str(applied.provider)
            yield Draft(key, f"{pl.protocol(applied)} login from outside: new value accepted, "
                        f"old {old}", key)

    #: the prove() phase of provider_apply.prove for this kind
    def _phase(self, run: Run) -> str:
        return "overlap" if str(run.start.strategy) == "overlap" else "cut"

    def observe(self, run: Run, io: StepIO) -> Outcome[Verified] | None:
        return None  # a proof is repeated, never remembered

    def act(self, run: Run, io: StepIO) -> Outcome[Verified]:
        return Outcome(Verified(""), "")

    def prove(self, run: Run, io: StepIO, acted: Outcome[Verified]) -> Outcome[Verified]:
        applied = pl.applied_of(run, io.step.subject)
        target = pl.rotation_target(run, applied)
        detail = prove(pl.reach(run, applied).probe, applied, target.accounts, target.old,
                       target.new, phase=self._phase(run), deadline=run.deadline())
        return Outcome(Verified(target.accounts.new), detail)


class VerifyRetired(VerifyProvider):
    """Overlap phase 2: the old value is valid nowhere on the provider."""

    phase: ClassVar[Phase] = "retire"

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if not inp.overlap:
            return
        for applied in pl.probed(inp.credential):
            key = str(applied.provider)
            yield Draft(key, f"{pl.protocol(applied)} login from outside: new value accepted, "
                        "old refused", key)

    def _phase(self, run: Run) -> str:
        return "retired"


class VerifyRestored(VerifyProvider):
    """A rollback: the restored value is accepted again."""

    phase: ClassVar[Phase] = "restore"

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.restore is None:
            return
        for applied in pl.probed(inp.credential):
            key = str(applied.provider)
            yield Draft(key, f"{pl.protocol(applied)} login from outside: the restored value "
                        "accepted", key)

    def prove(self, run: Run, io: StepIO, acted: Outcome[Verified]) -> Outcome[Verified]:
        applied = pl.applied_of(run, io.step.subject)
        target = pl.rollback_target(run, applied)  # old: the restored value
        detail = prove_accepts(pl.reach(run, applied).probe, applied, target.accounts.old,
                               target.old, refused=None, deadline=run.deadline())
        return Outcome(Verified(target.accounts.old), detail)
