"""The provider kinds in a plan: which steps a live method plans, per strategy, and the
rollback order of their undo (pure: no I/O)."""

from __future__ import annotations

from rotate.chain.loader import load_chain
from rotate.core.strategy import Strategy
from rotate.engine.kinds import ROTATION, undo_of
from rotate.engine.kinds.base import PlanInput
from rotate.engine.model import PreflightResult
from rotate.engine.plan import number_steps
from tests.support.paths import EXAMPLE_CHAIN


def _kinds(credential: str, strategy: Strategy) -> list[tuple[str, str]]:
    chain = load_chain(EXAMPLE_CHAIN)
    inp = PlanInput(chain, chain.credential(credential), strategy,
                    PreflightResult(current_version=3))
    return [(s.kind, s.phase) for s in number_steps(ROTATION, inp) if s.stage in (1, 3)]


def test_live_overlap_plans_apply_verify_retire_and_no_restart() -> None:
    assert _kinds("postgres", Strategy.overlap) == [
        ("backend.write", "main"), ("provider.apply", "main"), ("provider.verify", "main"),
        ("provider.retire", "main"), ("provider.verify", "retire"), ("backend.confirm", "main")]


def test_live_restart_is_one_apply_and_one_verify() -> None:
    assert _kinds("dragonfly", Strategy.restart) == [
        ("backend.write", "main"), ("provider.apply", "main"), ("provider.verify", "main"),
        ("backend.confirm", "main")]


def test_rollout_overlap_with_previous_key_is_unchanged() -> None:
    kinds = _kinds("dragonfly-acl", Strategy.overlap)
    assert ("provider.restart", "retire") in kinds and ("backend.retire", "main") in kinds
    assert not any(k == "provider.apply" or k == "provider.retire" for k, _ in kinds)


def test_a_rollback_removes_the_replaced_value_last() -> None:
    planned = {(k.name, k.phase) for k in ROTATION}
    order = [(k.name, k.phase) for k in undo_of(planned)]
    # then only the proof that the backend still holds the restored version
    assert order[-2:] == [("provider.retire", "restore"), ("backend.confirm", "main")]
    assert order.index(("provider.apply", "restore")) < order.index(("config.write", "restore"))
