"""④ ``token.mint``: a fresh machine token for each consumer, delivered into its Secret —
unless a newer token (another run's, minted after ours) is there already: the newest mint
wins (rotate.stages.tokens), ours is then revoked at once and ``superseded_by`` names the
newer one, which the consumer's pods read instead."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.core.timestamps import rfc3339, utcnow
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
    omit_none,
)
from rotate.stages import tokens


@dataclass(frozen=True)
class TokenMinted(StepData):
    token_id: str
    previous_ids: tuple[str, ...]  # tokens the service held before the run
    minted_ids: tuple[str, ...]  # every token minted by an attempt of this step
    #: when the first attempt was about to mint (RFC 3339 UTC); None in older journals
    mint_intent: str | None = omit_none()
    #: the newer token found in the Secret, which ours did not replace (None: delivered)
    superseded_by: str | None = omit_none()


class TokenMint(StepKind[TokenMinted]):
    name: ClassVar[str] = "token.mint"
    per_wave: ClassVar[bool] = True
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 14
    parallel: ClassVar[bool] = True  # one consumer each: independent requests
    lane: ClassVar[str | None] = "prepare"
    one_per_consumer: ClassVar[bool] = True
    #: prepared before stage ③ and never compensated: the old token stays valid until
    #: token.revoke, the last step, so old pods keep working with it either way
    prepares: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = TokenMinted
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF  # a rollback mints a fresh one
    event_reason: ClassVar[str | None] = "TokenMinted"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.TOKEN_DELIVERED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.token_secret(run, subject)  # the Secret that holds it

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for svc in inp.services:
            tok = svc.token
            yield Draft(f"{tok.namespace}/{tok.name}#{tok.key}",
                        f"mint a machine token for {svc.name}, deliver it", svc.name)

    def observe(self, run: Run, io: StepIO) -> Outcome[TokenMinted] | None:
        return None  # a token is never delivered twice: each attempt mints its own

    def act(self, run: Run, io: StepIO) -> Outcome[TokenMinted]:
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        if "previous_ids" not in io.prior:
            held = run.observed.token_ids.get(svc.name)  # preflight's read, moments ago
            io.record(previous_ids=list(held) if held is not None
                      else tokens.current_ids(cc, svc.name))
        if "mint_intent" not in io.prior:
            # journaled before any token exists: a kill -9 between minting and journaling its
            # id leaves a token tagged with the run id, created after this time, which
            # token.revoke finds and revokes
            io.record(mint_intent=rfc3339(utcnow()))

        def minted(token_id: str) -> None:
            io.record(minted_ids=[*io.prior.get("minted_ids", []), token_id])

        tid, newer = tokens.mint_and_deliver(
            cc, run.adapters.kube, svc.name, svc.token.namespace, svc.token.name,
            svc.token.key, on_minted=minted, label=run.run_id,
            older=io.prior["previous_ids"])
        where = f"{svc.token.namespace}/{svc.token.name}"
        shown = (f"token {tid} delivered to {where}" if newer is None else
                 f"token {tid} revoked unused: {where} holds {newer}, minted after it by "
                 "another run (the newest mint wins)")
        return Outcome(TokenMinted(tid, tuple(io.prior["previous_ids"]),
                                   tuple(io.prior.get("minted_ids", [])),
                                   str(io.prior["mint_intent"]), newer), shown)

    def prove(self, run: Run, io: StepIO, acted: Outcome[TokenMinted]) -> Outcome[TokenMinted]:
        return acted  # delivered: the consumer's rollout and readyz prove it is used
