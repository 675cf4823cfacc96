"""Every step kind declares everything the engine needs of it (rotate/engine/kinds/base.py).

The plan builder, the rollback builder and the executor know a kind only through these
declarations, so a kind that lacks one must fail here, not in the middle of a rotation.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rotate.engine.journal import load_file
from rotate.engine.kinds import REGISTRY, ROLLBACK_ONLY, ROTATION, UNDO_ONLY, kind_of, undo_of
from rotate.engine.kinds.backend_write import BackendRestore
from rotate.engine.kinds.base import Draft, PlanInput, StepData, StepKind
from rotate.engine.kinds.config_write import ConfigRestore
from rotate.engine.kinds.sync_trigger import SyncTrigger
from rotate.engine.kinds.sync_wait import SyncWaitRestored
from rotate.engine.kinds.token_mint import TokenMint, TokenMinted
from rotate.engine.model import PHASES, PlannedStep
from rotate.engine.run_start import RunStart

#: the kind strings of cli.md: the plan/run JSON, the journal and the CLI spell them so
CLI_KINDS = {"backend.write", "backend.adopt", "backend.retire", "backend.confirm", "sync.trigger",
             "sync.wait",
             "provider.restart", "provider.wait", "config.harvest", "config.write",
             "token.mint", "consumer.restart", "consumer.wait", "readyz.check", "token.revoke",
             "provider.apply", "provider.verify", "provider.retire", "config.undo",
             "consumer.undo", "workload.restart", "workload.wait", "workload.undo", "canary.bake"}
DECLARED = ("name", "phase", "stage", "exit_code", "parallel", "result", "undo")
_ABSENT = object()


def missing_declarations(kind: type[StepKind[Any]]) -> list[str]:
    """What ``kind`` fails to declare, in words (empty: complete)."""
    missing = [attr for attr in DECLARED if getattr(kind, attr, _ABSENT) is _ABSENT]
    missing += [f"method {m}" for m in sorted(getattr(kind, "__abstractmethods__", ()))]
    if missing:
        return missing
    if not isinstance(kind.name, str) or "." not in kind.name:
        missing.append(f"name {kind.name!r}")
    if kind.phase not in PHASES:
        missing.append(f"phase {kind.phase!r}")
    if kind.stage not in (1, 2, 3, 4):
        missing.append(f"stage {kind.stage!r}")
    if not (10 <= kind.exit_code <= 17 or kind.exit_code == 19):  # 19: a canary's bake
        missing.append(f"exit code {kind.exit_code!r} (cli.md: 10..17, 19)")
    if not isinstance(kind.parallel, bool):
        missing.append("parallel (a bool)")
    if not (isinstance(kind.result, type) and issubclass(kind.result, StepData)
            and dataclasses.is_dataclass(kind.result)
            and kind.result.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        missing.append("result (a frozen StepData dataclass)")
    if not isinstance(kind.undo, tuple) or any(
            (u.name, u.phase) not in REGISTRY for u in kind.undo):
        missing.append("undo (a tuple of registered kinds)")
    return missing


@pytest.mark.parametrize("kind", [*ROTATION, *ROLLBACK_ONLY], ids=lambda k: k.__name__)
def test_every_registered_kind_declares_everything(kind: type[StepKind[Any]]) -> None:
    assert missing_declarations(kind) == []


def test_the_check_fails_on_a_kind_that_lacks_a_declaration() -> None:
    class Incomplete(StepKind[Any]):
        name: ClassVar[str] = "backend.write"
        stage: ClassVar[int] = 1

        @classmethod
        def plan(cls, inp: PlanInput) -> Iterable[Draft]:
            return ()

    missing = missing_declarations(Incomplete)
    assert {"exit_code", "result", "undo"} <= set(missing)
    assert {"method act", "method observe", "method prove"} <= set(missing)
    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]


def test_the_registry_has_one_class_per_kind_and_phase_with_the_cli_names() -> None:
    kinds = [*ROTATION, *ROLLBACK_ONLY, *UNDO_ONLY]
    assert len(REGISTRY) == len(kinds)
    assert {k.name for k in kinds} == CLI_KINDS
    for kind in kinds:
        step = PlannedStep(1, kind.stage, kind.name, "target", phase=kind.phase)
        assert kind_of(step) is kind


def test_every_kind_a_rollback_runs_is_the_undo_of_a_rotation_kind() -> None:
    undone = undo_of({(k.name, k.phase) for k in ROTATION})
    assert set(ROLLBACK_ONLY) <= set(undone)
    assert all((k.name, k.phase) in REGISTRY for k in undone)


def test_every_compensation_is_an_undo_only_kind_that_plans_nothing() -> None:
    compensated = {k: k.compensate for k in ROTATION if k.compensate is not None}
    assert {k.name for k in compensated} == {"config.write", "consumer.restart",
                                             "workload.restart"}
    assert set(compensated.values()) == set(UNDO_ONLY)
    assert all((k.prepares or k.prepares_after_sync) and k.stage == 4 for k in compensated)


def test_step_data_round_trips_through_the_journal_json() -> None:
    minted = TokenMinted("t-2", ("t-1",), ("t-2",))
    as_json = minted.to_json()
    assert as_json == {"token_id": "t-2", "previous_ids": ["t-1"], "minted_ids": ["t-2"]}
    # a journaled step's data also holds progress facts, its detail and timing
    assert TokenMinted.from_json({**as_json, "detail": "x", "seconds": 1.0}) == minted


def test_journals_written_before_phases_were_typed_still_resume() -> None:
    steps = [{"index": 1, "stage": 1, "kind": "backend.write", "target": "t"},
             {"index": 2, "stage": 2, "kind": "sync.wait", "target": "t", "subject": "retire"},
             {"index": 3, "stage": 3, "kind": "provider.wait", "target": "t",
              "subject": "retire:deployment/dragonfly/dragonfly"}]
    rotation = RunStart.from_json({"run_id": "r", "operation": "rotate",
                                   "strategy": "overlap", "steps": steps})
    assert [(s.kind, s.phase, s.subject) for s in rotation.steps] == [
        ("backend.write", "main", ""), ("sync.wait", "retire", ""),
        ("provider.wait", "retire", "deployment/dragonfly/dragonfly")]



def test_rollbacks_journaled_before_phases_were_typed_read_their_restore_forms(
        tmp_path: Path) -> None:
    """Such a rollback spelled its restore forms with the rotation's phase; the journal reads
    them as the forms the kinds declare (``legacy_rollback_form``), every other step as is."""
    kinds = ["backend.write", "sync.trigger", "sync.wait", "config.write", "token.mint"]
    steps = [{"index": i, "stage": 1, "kind": k, "target": "t"}
             for i, k in enumerate(kinds, start=1)]
    path = tmp_path / "journal.jsonl"
    path.write_text(json.dumps({"ts": "2026-01-01T00:00:00Z", "event": "run.start", "data": {
        "run_id": "r", "operation": "rollback", "steps": steps}}) + "\n")
    rollback = load_file(path, "r").start
    assert [s.phase for s in rollback.steps] == [
        "restore", "main", "restore", "restore", "main"]
    assert [kind_of(s) for s in rollback.steps] == [
        BackendRestore, SyncTrigger, SyncWaitRestored, ConfigRestore, TokenMint]


def test_a_harvest_of_many_consumers_names_the_first_and_the_last() -> None:
    from rotate.engine.kinds.config_harvest import names_in_short

    assert names_in_short(["cart", "order", "user"]) == "cart, order, user"
    five = [f"s{i}" for i in range(1, 6)]
    assert names_in_short(five) == "s1, s2, s3, s4, s5"
    many = ["cart", "order", "user"] + [f"consumer-{i:03d}" for i in range(4, 101)]
    assert names_in_short(many) == "cart, order, user, …, consumer-100 (100)"


def test_no_module_outside_the_kinds_spells_a_kinds_name() -> None:
    """Generic code asks a kind (kind_of, find) for what it needs; a string equal to a kind's
    name anywhere else in the product would be knowledge the kind no longer owns."""
    import ast

    from tests.support.paths import ROTATE_PACKAGE

    names = {k.name for k in REGISTRY.values()}
    kinds_dir = ROTATE_PACKAGE / "engine" / "kinds"
    spelled = [f"{path.relative_to(ROTATE_PACKAGE)}:{node.lineno} {node.value}"
               for path in sorted(ROTATE_PACKAGE.rglob("*.py"))
               if kinds_dir not in path.parents
               for node in ast.walk(ast.parse(path.read_text(), str(path)))
               if isinstance(node, ast.Constant) and node.value in names]
    assert spelled == []
