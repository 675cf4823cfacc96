"""④ ``token.revoke``: the tokens a consumer held before the run, once its new pods use the
new one (and tokens an earlier attempt minted but never delivered)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
from rotate.engine.kinds.token_mint import TokenMint
from rotate.stages import tokens


@dataclass(frozen=True)
class TokensRevoked(StepData):
    revoked: tuple[str, ...]


class TokenRevoke(StepKind[TokensRevoked]):
    name: ClassVar[str] = "token.revoke"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 14
    parallel: ClassVar[bool] = True  # one consumer each: independent requests
    lane: ClassVar[str | None] = "finish"
    result: ClassVar[type[StepData]] = TokensRevoked
    #: a rollback mints fresh tokens, then revokes every other one the consumer held —
    #: those the rolled-back run minted included (a revoked token stays revoked)
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    event_reason: ClassVar[str | None] = "TokensRevoked"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.TOKENS_REVOKED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)  # the workload that held them

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            if inp.restore is not None:
                yield Draft(svc.name, "revoke the tokens the rolled-back run minted and every "
                            "other token held before this rollback", svc.name)
                continue
            held = inp.observed.token_ids.get(svc.name, ())
            yield Draft(svc.name, f"revoke {len(held)} token(s) held before the run", svc.name)

    def observe(self, run: Run, io: StepIO) -> Outcome[TokensRevoked] | None:
        return None  # revoking a revoked token is a no-op

    def act(self, run: Run, io: StepIO) -> Outcome[TokensRevoked]:
        name = io.step.subject
        minted = run.result(TokenMint, name)
        keep = {minted.token_id} if minted else set()
        # tokens held before the run, and tokens minted by an earlier attempt that never got
        # delivered (the attempt failed after minting): neither is used by the new pods
        candidates = [*minted.previous_ids, *minted.minted_ids] if minted else []
        if minted is not None:  # minted by an attempt killed before it journaled the id
            candidates += tokens.minted_by(run.adapters.config_center, name, run.run_id,
                                           minted.mint_intent or "", minted.previous_ids)
        ids = list(dict.fromkeys(i for i in candidates if i not in keep))
        revoked = tokens.revoke(run.adapters.config_center, name, ids)
        return Outcome(TokensRevoked(tuple(revoked)), f"revoked {len(revoked)} token(s)")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[TokensRevoked]) -> Outcome[TokensRevoked]:
        return acted
