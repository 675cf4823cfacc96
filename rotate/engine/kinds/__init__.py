"""The registry of step kinds: every kind, in the order a rotation runs them.

Adding a kind is one new module (a :class:`~rotate.engine.kinds.base.StepKind` subclass
declaring what ``base`` lists) and its place in :data:`ROTATION` — or in
:data:`ROLLBACK_ONLY` when only a rollback runs it (as the ``undo`` of a rotation kind).
The plan builder walks :data:`ROTATION`, the rollback builder the ``undo`` of the kinds the
original run planned, the executor looks each planned step up with :func:`kind_of`, and
everything else asks the class it finds (:func:`find`, for a journaled step) what it needs —
its events, what its journaled steps say of the chain's state, what rollback, resume and the
report read from its data; nothing outside this package knows a kind by its name.

For example, a ``provider.apply`` kind (a provider changed through its own API, e.g. a Redis
ACL): ``kinds/provider_apply.py`` with ``class ProviderApply(StepKind[Applied])`` — stage 3,
exit code 12, ``plan`` yielding one step per provider the chain file says is applied live,
``observe`` (does the provider already accept ``ensure_value(run)``?), ``act`` (set it),
``prove`` (authenticate with it), ``undo = ITSELF`` (a rollback applies the restored value
the same way), ``event_reason`` and ``objects`` (its Normal event, on the provider's
workload), ``tells`` (what its journaled steps say of the provider) — placed in
:data:`ROTATION` after ``ProviderWait``.  What preflight learns for its plan detail goes in
a new field of ``PreflightResult``, which ``plan`` reads as
``inp.observed``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rotate.engine.kinds.backend_confirm import BackendConfirm
from rotate.engine.kinds.backend_retire import BackendRetire
from rotate.engine.kinds.backend_write import BackendAdopt, BackendRestore, BackendWrite
from rotate.engine.kinds.base import StepKind
from rotate.engine.kinds.canary_bake import CanaryBake
from rotate.engine.kinds.config_harvest import ConfigHarvest
from rotate.engine.kinds.config_write import ConfigRestore, ConfigUndo, ConfigWrite
from rotate.engine.kinds.consumer_restart import ConsumerRestart
from rotate.engine.kinds.consumer_undo import ConsumerUndo
from rotate.engine.kinds.consumer_wait import ConsumerWait
from rotate.engine.kinds.provider_apply import ApplyLive, ApplyRestore
from rotate.engine.kinds.provider_restart import ProviderRestart, ProviderRestartRetire
from rotate.engine.kinds.provider_retire import RetireLive, RetireReplaced
from rotate.engine.kinds.provider_verify import VerifyProvider, VerifyRestored, VerifyRetired
from rotate.engine.kinds.provider_wait import ProviderWait, ProviderWaitRetire
from rotate.engine.kinds.readyz_check import ReadyzCheck
from rotate.engine.kinds.sync_trigger import SyncTrigger
from rotate.engine.kinds.sync_wait import SyncWait, SyncWaitRestored, SyncWaitRetire
from rotate.engine.kinds.token_mint import TokenMint
from rotate.engine.kinds.token_revoke import TokenRevoke
from rotate.engine.kinds.workload_consumer import WorkloadRestart, WorkloadUndo, WorkloadWait
from rotate.engine.model import Phase, PlannedStep
from rotate.engine.run_start import RunStart

Kind = type[StepKind[Any]]

#: A rotation, in order: phase 1 (① backend → ② sync → ③ providers → ④ consumers), the
#: overlap strategy's phase 2 (each of its kinds plans nothing under ``restart``), then the
#: old tokens revoked, and last the proof that the backend still holds the run's version.
#: Under ``restart`` the plan moves the steps of the kinds that
#: ``prepares`` ahead of stage ③, beside ② sync.wait (rotate.engine.plan.ordered_drafts).
#: The token mints come first of ④: a token needs nothing else, and taking them out of the
#: consumers' lanes (document → restart) keeps a mint's requests out of every lane's way.
ROTATION: tuple[Kind, ...] = (
    BackendWrite, BackendAdopt, SyncTrigger, SyncWait, ProviderRestart, ProviderWait, ApplyLive,
    VerifyProvider,
    TokenMint, ConfigHarvest, ConfigWrite, ConsumerRestart, WorkloadRestart, ConsumerWait,
    WorkloadWait, ReadyzCheck, CanaryBake,
    BackendRetire, SyncWaitRetire, ProviderRestartRetire, ProviderWaitRetire, RetireLive,
    VerifyRetired,
    TokenRevoke, BackendConfirm,
)
#: Kinds only a rollback plans: the undo of a rotation kind that is not that kind again.
ROLLBACK_ONLY: tuple[Kind, ...] = (BackendRestore, SyncWaitRestored, ConfigRestore,
                                   ApplyRestore, VerifyRestored, RetireReplaced)
#: Kinds only a failing run adds: the ``compensate`` of a step prepared ahead of stage ③.
UNDO_ONLY: tuple[Kind, ...] = (ConfigUndo, ConsumerUndo, WorkloadUndo)

REGISTRY: dict[tuple[str, Phase], Kind] = {(k.name, k.phase): k
                                           for k in (*ROTATION, *ROLLBACK_ONLY, *UNDO_ONLY)}
_BY_NAME: dict[str, Kind] = {}
for _kind in REGISTRY.values():
    _BY_NAME.setdefault(_kind.name, _kind)


def kind_of(step: PlannedStep) -> Kind:
    """The class of a planned step (KeyError: a kind this version does not know)."""
    return REGISTRY[(step.kind, step.phase)]


def find(step: PlannedStep) -> Kind | None:
    """The class of a journaled step, for what it declares: its own form, else the first
    registered form of its name (a phase this version does not plan; the forms of one name
    tell, write and are told on alike); None for a record that is no step kind (the
    preflight record) or a kind this version does not know."""
    return REGISTRY.get((step.kind, step.phase)) or _BY_NAME.get(step.kind)


def read_untyped_rollback(start: RunStart) -> RunStart:
    """A rollback journaled before phases were typed, read into the typed form: it spelled
    each restore form that declares ``legacy_rollback_form`` with the phase ``main``."""
    def typed(step: PlannedStep) -> PlannedStep:
        restore = REGISTRY.get((step.kind, "restore"))
        if step.phase == "main" and restore is not None and restore.legacy_rollback_form:
            return dataclasses.replace(step, phase="restore")
        return step

    return dataclasses.replace(start, steps=tuple(typed(s) for s in start.steps))


def undo_of(planned: set[tuple[str, Phase]]) -> list[Kind]:
    """The kinds that undo a run which planned ``planned`` (kind, phase) pairs, in the order
    a rotation runs what they undo (a kind marked ``rollback_last`` after all of them)."""
    out: list[Kind] = []
    for kind in ROTATION:
        if (kind.name, kind.phase) in planned:
            out += [u for u in kind.undo if u not in out]
    return [k for k in out if not k.rollback_last] + [k for k in out if k.rollback_last]
