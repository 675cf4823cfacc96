"""Golden output of the CLI under NO_COLOR=1, COLUMNS=100, without a TTY (plain lines); the
run report also on a terminal at 80 and 160 columns.

The engine is the fake from tests.fakes.engine, injected through CliState. Rewrite the files
with ROTATE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fakes.engine import FakeEngine
from tests.support.cli import check_golden, invoke

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def _chain_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "rotate.yaml").write_text("ok\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path


def test_help_lists_commands_and_credential_usage() -> None:
    result = invoke(["--help"])
    assert result.exit_code == 0
    assert "rotate CREDENTIAL --confirm" in result.stdout
    for command in ("list", "runs", "show", "resume", "rollback", "doctor", "lab"):
        assert re.search(rf"^  {command}\b", result.stdout, re.M), command
    check_golden("help.txt", result.stdout)


def test_credential_help() -> None:
    result = invoke(["dragonfly", "--help"])
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: rotate CREDENTIAL [OPTIONS]")
    check_golden("help_credential.txt", result.stdout)


def test_plan_text_plain() -> None:
    engine = FakeEngine()
    result = invoke(["dragonfly"], engine)
    assert result.exit_code == 0
    assert result.stderr == ""
    assert [name for name, _ in engine.calls] == ["plan"]
    check_golden("plan.txt", result.stdout)


def test_plan_table_on_a_terminal() -> None:
    result = invoke(["dragonfly"], env={"TTY_COMPATIBLE": "1"})
    assert result.exit_code == 0
    text = ANSI.sub("", result.stdout)
    assert "② sync" in text and "derived from the chain file" in text
    check_golden("plan_table.txt", text)


def test_plan_json() -> None:
    result = invoke(["dragonfly", "-o", "json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["kind"] == "plan" and doc["credential"] == "dragonfly"
    assert [s["index"] for s in doc["steps"]] == list(range(1, 11))
    check_golden("plan_json.txt", result.stdout)


def test_failed_run_report_with_resume_and_rollback_commands() -> None:
    result = invoke(["dragonfly", "--confirm"], FakeEngine(outcome="failed"))
    assert result.exit_code == 15
    assert "rotate resume 20261202T140300Z-dragonfly-a1b2 --confirm" in result.stderr
    assert "rotate rollback 20261202T140300Z-dragonfly-a1b2 --confirm" in result.stderr
    check_golden("run_failed.txt", result.stdout)
    check_golden("run_failed_progress.txt", result.stderr)


@pytest.mark.parametrize("columns", ["80", "160"])
def test_failed_run_report_on_a_terminal_reads_at_80_columns_and_wide(columns: str) -> None:
    """At 80 columns the stage heads its steps and each detail has lines of its own; wide,
    one row per step. Never a status cut to ``d…``, never a detail dropped."""
    result = invoke(["dragonfly", "--confirm"], FakeEngine(outcome="failed"),
                    env={"TTY_COMPATIBLE": "1", "COLUMNS": columns})
    assert result.exit_code == 15
    text = ANSI.sub("", result.stdout)
    assert "…" not in text and "0 of 2 new pods Ready after 120s" in text
    assert all(len(line) <= int(columns) for line in text.splitlines())
    assert " failed " in text and " pending" in text
    check_golden(f"run_failed_table_{columns}.txt", text)


def test_runs() -> None:
    result = invoke(["runs"])
    assert result.exit_code == 0
    check_golden("runs.txt", result.stdout)


def test_show() -> None:
    result = invoke(["show", "20261202T140300Z-dragonfly-a1b2"])
    assert result.exit_code == 0
    check_golden("show.txt", result.stdout)


def test_doctor_with_missing_permission() -> None:
    engine = FakeEngine()
    engine.checks = (*engine.checks[:1], engine.checks[2].__class__(
        "kube.permissions", False, "missing: patch deployments in shop; create leases in "
        "rotate-system"))
    result = invoke(["doctor"], engine)
    assert result.exit_code == 3
    check_golden("doctor.txt", result.stdout)


def test_list() -> None:
    result = invoke(["list"])
    assert result.exit_code == 0
    check_golden("list.txt", result.stdout)


def test_status_closed() -> None:
    result = invoke(["status"])
    assert result.exit_code == 0
    assert result.stderr == ""
    check_golden("status.txt", result.stdout)


def test_status_open_names_the_first_broken_link_and_its_command() -> None:
    result = invoke(["status", "dragonfly", "--chain", "rotate.yaml"], FakeEngine(chain="secret"))
    assert result.exit_code == 20
    assert ("error: the chain of dragonfly is not closed: secret "
            "dragonfly/dragonfly-password-secret#password") in result.stderr
    assert "close it with `rotate dragonfly --adopt --confirm --chain rotate.yaml`" \
        in result.stderr
    check_golden("status_open.txt", result.stdout)


def test_status_json_and_yaml_documents() -> None:
    result = invoke(["status", "-o", "json"], FakeEngine(chain="secret"))
    assert result.exit_code == 20
    doc = json.loads(result.stdout)
    assert (doc["apiVersion"], doc["kind"], doc["closed"], doc["exit_code"]) == (
        "rotate/v1", "status", False, 20)
    (cred,) = doc["credentials"]
    assert cred["broken"]["link"] == "secret"
    assert cred["command"] == "rotate dragonfly --adopt --confirm"
    check_golden("status_json.txt", result.stdout)
    yaml_result = invoke(["status", "-o", "yaml"], FakeEngine(chain="secret"))
    assert yaml_result.exit_code == 20
    from ruamel.yaml import YAML

    assert YAML(typ="safe").load(yaml_result.stdout) == doc
    check_golden("status_yaml.txt", yaml_result.stdout)


def test_status_of_an_unknown_credential_is_a_usage_error() -> None:
    result = invoke(["status", "nope"])
    assert result.exit_code == 2
    assert "unknown credential 'nope'" in result.stderr
