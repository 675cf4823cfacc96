"""``rotate due`` through the real CLI against the fake engine (tests.fakes.engine): the
listing, its documents, ``--exit-code``, ``--confirm`` as one run, bad input.  Golden files
under NO_COLOR (tests/unit/golden/due*.txt; ROTATE_UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.engine import FakeEngine
from tests.support.cli import check_golden, invoke


@pytest.fixture(autouse=True)
def _chain_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "rotate.yaml").write_text("ok\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path


def test_due_lists_every_credential_and_ends_with_the_next_commands() -> None:
    engine = FakeEngine()
    result = invoke(["due", "--chain", "rotate.yaml"], engine)
    assert result.exit_code == 0 and result.stderr == ""
    assert [name for name, _ in engine.calls] == ["due"]  # read-only: nothing run
    assert "Plan it: rotate dragonfly --chain rotate.yaml" in result.stdout
    assert "Rotate it: rotate due --confirm --chain rotate.yaml" in result.stdout
    check_golden("due.txt", result.stdout)


def test_exit_code_21_when_something_is_due_and_0_when_nothing_is() -> None:
    assert invoke(["due", "--exit-code"]).exit_code == 21
    quiet = invoke(["due", "--exit-code"], FakeEngine(due_found="none"))
    assert quiet.exit_code == 0
    assert quiet.stdout.rstrip().endswith("Nothing is due.")


def test_due_json_and_yaml_documents() -> None:
    result = invoke(["due", "-o", "json", "--exit-code"])
    assert result.exit_code == 21
    doc = json.loads(result.stdout)
    assert (doc["apiVersion"], doc["kind"], doc["due"], doc["exit_code"]) == (
        "rotate/v1", "due", ["dragonfly"], 21)
    assert doc["command"] == "rotate due --confirm" and doc["plan"] == "rotate dragonfly"
    first = doc["credentials"][0]
    assert first["triggers"] == ["maxAge"] and first["next_due"] == "2026-12-01T14:03:00Z"
    assert doc["credentials"][2]["next_due"] is None
    check_golden("due_json.txt", result.stdout)
    yaml_result = invoke(["due", "-o", "yaml"])
    assert yaml_result.exit_code == 0 and "kind: due" in yaml_result.stdout


def test_confirm_rotates_what_is_due_as_one_run_with_that_runs_exit_code() -> None:
    engine = FakeEngine(outcome="failed")
    result = invoke(["due", "--confirm"], engine)
    assert result.exit_code == 15  # the run's: a consumer rollout failed
    assert [name for name, _ in engine.calls] == ["due", "run"]
    assert "Due: dragonfly — rotating as one run." in result.stdout
    assert "rotate resume 20261202T140300Z-dragonfly-a1b2 --confirm" in result.stderr


def test_confirm_json_prints_the_run_document() -> None:
    result = invoke(["due", "--confirm", "-o", "json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["kind"] == "run"
    assert "due: dragonfly: rotating as one run" in result.stderr


def test_confirm_with_nothing_due_changes_nothing_and_exits_0() -> None:
    engine = FakeEngine(due_found="none")
    result = invoke(["due", "--confirm", "-o", "json"], engine)
    assert result.exit_code == 0
    assert [name for name, _ in engine.calls] == ["due"]
    assert json.loads(result.stdout)["due"] == []


def test_an_unreadable_backend_exits_3_naming_doctor_and_rotates_nothing() -> None:
    engine = FakeEngine(due_found="error")
    result = invoke(["due", "--confirm"], engine)
    assert result.exit_code == 3
    assert [name for name, _ in engine.calls] == ["due"]
    assert "postgres: whether it is due is unknown: cannot read secret/infra/postgres" \
           in result.stderr
    assert "rotate doctor" in result.stderr and "nothing was rotated" in result.stderr
    check_golden("due_unknown.txt", result.stdout)


def test_an_unknown_credential_is_a_usage_error_naming_the_known_ones() -> None:
    result = invoke(["due", "nope"])
    assert result.exit_code == 2
    assert "unknown credential 'nope' (the chain file defines: dragonfly, postgres, redis)" \
           in result.stderr


def test_named_credentials_only() -> None:
    result = invoke(["due", "postgres", "-o", "json"])
    assert [c["credential"] for c in json.loads(result.stdout)["credentials"]] == ["postgres"]


def test_a_due_credential_whose_value_comes_from_stdin_is_left_to_a_person() -> None:
    engine = FakeEngine(due_found="stdin")
    result = invoke(["due", "--confirm"], engine)
    assert result.exit_code == 0
    assert [name for name, _ in engine.calls] == ["due"]  # nothing run
    assert "dragonfly is due and takes its value from stdin" in result.stderr
    assert "`rotate dragonfly --confirm --value-stdin`" in result.stderr
    assert "Due: dragonfly." in result.stdout
    assert invoke(["due", "--exit-code"], FakeEngine(due_found="stdin")).exit_code == 21
