"""④ ``token.revoke``: once a consumer's new pods are proven, every live token of it minted
before the one the run delivered (or before the newer one that superseded it) — the tokens it
held before the run, another run's older token — and every token this run minted but did
not deliver.  Never the delivered token, never a newer one: a newer token is another run's,
still being delivered, and that run revokes ours (rotate.stages.tokens)."""

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
    one_per_consumer: ClassVar[bool] = True
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
        cc = run.adapters.config_center
        minted = run.result(TokenMint, name)
        if minted is None:
            return Outcome(TokensRevoked(()), "revoked 0 token(s)")
        # the token the consumer's proven pods read: ours, or the newer one that superseded it
        keep = minted.superseded_by or minted.token_id
        # tokens minted by an earlier attempt that never got delivered (the attempt failed
        # after minting), or by an attempt killed before it journaled the id
        candidates = [*minted.minted_ids,
                      *tokens.minted_by(cc, name, run.run_id, minted.mint_intent or "",
                                        minted.previous_ids)]
        older = tokens.older_than(cc, name, keep)
        candidates += minted.previous_ids if older is None else older
        ids = list(dict.fromkeys(i for i in candidates if i != keep))
        revoked = tokens.revoke(cc, name, ids)
        return Outcome(TokensRevoked(tuple(revoked)), f"revoked {len(revoked)} token(s)")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[TokensRevoked]) -> Outcome[TokensRevoked]:
        return acted
