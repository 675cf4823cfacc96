"""The plan: chain file + what preflight observed → the ordered steps (chain.md). Pure.

No I/O here, so the plan printed by ``--dry-run`` is exactly what ``--confirm`` executes,
and golden tests need no system around.  Each step kind describes its own steps
(``StepKind.plan``): one step per object for kinds that act on several objects (a
``consumer.restart`` per consumer), each with a concrete ``target`` and a ``detail``
holding the versions it expects ("v7 → v8 (cas=7)").  This module only walks the kinds in
rotation order (:data:`rotate.engine.kinds.ROTATION`) and numbers their steps.

Under the ``restart`` strategy a rotation *prepares* the consumers before stage ③: the steps
of every ``prepares`` kind (token mints, harvest, document writes, consumer restarts) move
right before the ``syncs`` step (sync.wait), in their own order, and the executor runs them
beside it.  So the new consumer pods start while ESO reacts and are already started —
unready, the old pods still serving — when the provider switches; they become Ready within a
readiness period instead of a pod start, and ESO's reaction is not in their way
(chain.md "Order").  They need the new value only from the backend, where backend.write put
it: the harvest builds the documents with it in place of what the Secret holds, and
sync.wait then proves the Secret holds exactly that value before anything switches.  A draft
marked ``late`` (a workload whose old pods would go before new ones are Ready) stays where
the kind is in :data:`ROTATION`, after the switch.  The overlap strategy and rollbacks keep
the plain order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rotate.chain.model import Chain, Credential
from rotate.chain.waves import waves_of, with_canary
from rotate.core.strategy import Strategy
from rotate.engine.kinds import ROTATION, Kind
from rotate.engine.kinds.base import Draft, PlanInput
from rotate.engine.model import Adoption, Plan, PlannedStep, PreflightResult
from rotate.engine.targets import backend_target


def ordered_drafts(kinds: Iterable[Kind], inp: PlanInput) -> list[tuple[Kind, Draft]]:
    """Every kind's drafts in run order (the prepared ones right before sync.wait, ahead of
    stage ③ — see above)."""
    drafted = in_waves([(kind, draft) for kind in kinds for draft in kind.plan(inp)], inp)
    if not inp.prepare_first or not any(kind.stage == 3 for kind, _ in drafted):
        return drafted
    ahead = _move_ahead(drafted, lambda kind: kind.syncs, lambda kind: kind.prepares)
    return _move_behind(ahead, lambda kind: kind.syncs, lambda kind: kind.prepares_after_sync)


def in_waves(drafted: list[tuple[Kind, Draft]], inp: PlanInput) -> list[tuple[Kind, Draft]]:
    """``drafted`` with the consumers' steps (the ``per_wave`` kinds') in waves: every step
    of wave 1's consumers, in the kinds' order, then the canary's bake (``divides_waves``),
    then wave 2's, and so on (rotate.chain.waves).  What sat among them and moves with no
    wave (the harvest: every document validated before any is written) goes first.
    Unchanged for a rollback and for a credential without ``waves`` or ``canary``."""
    cred = inp.credential
    if inp.restore is not None or (cred.waves is None and cred.canary is None):
        return drafted
    waves = with_canary(waves_of(cred.waves, inp.wave_members), cred.canary)

    def moves(kind: Kind) -> bool:
        return (kind.per_wave and kind.phase == "main") or kind.divides_waves

    at = [i for i, (kind, _) in enumerate(drafted) if moves(kind)]
    if not at:
        return drafted
    span = drafted[at[0]:at[-1] + 1]
    ordered: list[tuple[Kind, Draft]] = []
    bakes = [kd for kd in span if kd[0].divides_waves]
    for n, wave in enumerate(waves):
        ordered += [kd for kd in span if moves(kd[0]) and not kd[0].divides_waves
                    and (kd[1].subject in wave or (n == 0 and not kd[1].subject))]
        if n == 0:
            ordered += bakes
    placed = {id(kd) for kd in ordered}
    ordered += [kd for kd in span if moves(kd[0]) and id(kd) not in placed]  # in no wave
    stay = [kd for kd in span if not moves(kd[0])]
    return [*drafted[:at[0]], *stay, *ordered, *drafted[at[-1] + 1:]]


def _move_behind(drafted: list[tuple[Kind, Draft]], after: Callable[[Kind], bool],
                 moves: Callable[[Kind], bool]) -> list[tuple[Kind, Draft]]:
    """``drafted`` with the main-phase drafts (but ``late`` ones) of the kinds ``moves``
    picks moved right after the last draft of a kind ``after`` picks (workloads that read
    a Secret start once every Secret is proven, before the switch); unchanged without one."""
    at = max((i for i, (kind, _) in enumerate(drafted) if after(kind)), default=None)
    if at is None:
        return drafted

    def moved(kind: Kind, draft: Draft) -> bool:
        return moves(kind) and kind.phase == "main" and not draft.late

    head, tail = drafted[:at + 1], drafted[at + 1:]
    return [*head, *[kd for kd in tail if moved(*kd)], *[kd for kd in tail if not moved(*kd)]]


def _move_ahead(drafted: list[tuple[Kind, Draft]], before: Callable[[Kind], bool],
                moves: Callable[[Kind], bool]) -> list[tuple[Kind, Draft]]:
    """``drafted`` with the main-phase drafts (but ``late`` ones) of the kinds ``moves`` picks
    moved right before the first draft of a kind ``before`` picks, both parts keeping their
    order; unchanged when there is no such draft."""
    at = next((i for i, (kind, _) in enumerate(drafted) if before(kind)), None)
    if at is None:
        return drafted

    def moved(kind: Kind, draft: Draft) -> bool:
        return moves(kind) and kind.phase == "main" and not draft.late

    head, tail = drafted[:at], drafted[at:]
    return [*head, *[kd for kd in tail if moved(*kd)], *[kd for kd in tail if not moved(*kd)]]


def number_steps(kinds: Iterable[Kind], inp: PlanInput) -> list[PlannedStep]:
    """Every kind's steps, in run order, numbered from 1."""
    return [PlannedStep(i, kind.stage, kind.name, draft.target, draft.detail, draft.subject,
                        kind.phase)
            for i, (kind, draft) in enumerate(ordered_drafts(kinds, inp), start=1)]


def build_plan(
    chain: Chain, credential: Credential, strategy: Strategy, observed: PreflightResult,
    adopt: Adoption | None = None,
) -> Plan:
    """The plan; ``adopt`` (``--adopt``): ``backend.adopt`` in place of ``backend.write``,
    and no step at all when there is nothing to adopt."""
    inp = PlanInput(chain, credential, strategy, observed, adopt=adopt)
    steps = () if adopt is not None and adopt.noop else tuple(number_steps(ROTATION, inp))
    return Plan(
        credential=credential.name,
        strategy=strategy,
        consumers=tuple(observed.consumers),
        providers=tuple(str(p) for p in credential.providers),
        backend_path=backend_target(chain, credential),
        current_version=observed.current_version,
        preflight=observed.checks,
        traps=observed.traps,
        steps=steps,
        strategy_reason=credential.strategy_reason if strategy == credential.strategy else "",
        readers=dict(observed.readers),
        adopt=adopt,
        strategy_given=strategy != credential.strategy,
        **_waves_of_plan(credential, inp),
    )


def _waves_of_plan(credential: Credential, inp: PlanInput) -> dict[str, Any]:
    """The plan's ``waves`` and ``canary`` (none for a credential without them)."""
    if credential.waves is None and credential.canary is None:
        return {}
    waves = with_canary(waves_of(credential.waves, inp.wave_members), credential.canary)
    canary = credential.canary
    out: dict[str, Any] = {"waves": tuple(waves)}
    if canary is not None and waves:
        query = canary.query
        out["canary"] = {"consumers": list(waves[0]), "bake_seconds": canary.bake,
                         "query": {"expr": query.expr, "max": query.max}
                         if query is not None else None}
    return out
