"""The plan: chain file + what preflight observed → the ordered steps (chain.md). Pure.

No I/O here, so the plan printed by ``--dry-run`` is exactly what ``--confirm`` executes,
and golden tests need no system around.  Each step kind describes its own steps
(``StepKind.plan``): one step per object for kinds that act on several objects (a
``consumer.restart`` per consumer), each with a concrete ``target`` and a ``detail``
holding the versions it expects ("v7 → v8 (cas=7)").  This module only walks the kinds in
rotation order (:data:`rotate.engine.kinds.ROTATION`) and numbers their steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from rotate.chain.model import Chain, Credential
from rotate.core.strategy import Strategy
from rotate.engine.kinds import ROTATION, Kind
from rotate.engine.kinds.base import PlanInput
from rotate.engine.model import Plan, PlannedStep, PreflightResult
from rotate.engine.targets import backend_target


def number_steps(kinds: Iterable[Kind], inp: PlanInput) -> list[PlannedStep]:
    """Every kind's steps, in order, numbered from 1."""
    steps: list[PlannedStep] = []
    for kind in kinds:
        for draft in kind.plan(inp):
            steps.append(PlannedStep(len(steps) + 1, kind.stage, kind.name, draft.target,
                                     draft.detail, draft.subject, kind.phase))
    return steps


def build_plan(
    chain: Chain, credential: Credential, strategy: Strategy, observed: PreflightResult
) -> Plan:
    inp = PlanInput(chain, credential, strategy, tuple(observed.consumers),
                    current_version=observed.current_version,
                    config_versions=observed.config_versions, token_ids=observed.token_ids,
                    reloader=observed.reloader, ondelete=observed.ondelete)
    return Plan(
        credential=credential.name,
        strategy=strategy,
        consumers=tuple(observed.consumers),
        providers=tuple(str(p) for p in credential.providers),
        backend_path=backend_target(chain, credential),
        current_version=observed.current_version,
        preflight=observed.checks,
        traps=observed.traps,
        steps=tuple(number_steps(ROTATION, inp)),
    )
