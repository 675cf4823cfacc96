"""Every JSON document the CLI prints is versioned, and ``--report-file`` writes the same one.

Real CLI, fake engine and fake lab (CliState seam). docs/cli.md "JSON documents" lists the
kinds asserted here.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from rotate.cli.console import API_VERSION, versioned
from tests.fakes.engine import RUN_ID, FakeEngine
from tests.fakes.lab import FakeLab
from tests.support.cli import invoke


@pytest.fixture(autouse=True)
def _chain_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "rotate.yaml").write_text("ok\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path


@pytest.mark.parametrize(("args", "outcome", "kind"), [
    (["dragonfly"], "succeeded", "plan"),
    (["dragonfly", "--confirm"], "succeeded", "run"),
    (["dragonfly", "--confirm"], "failed", "run"),
    (["dragonfly", "--confirm"], "lock", "error"),
    (["dragonfly", "--confirm"], "bug", "error"),
    (["dragonfly", "--confirm"], "preflight", "plan"),
    (["resume", RUN_ID, "--confirm"], "failed", "run"),
    (["rollback", RUN_ID], "succeeded", "run"),
    (["runs"], "succeeded", "runs"),
    (["show", RUN_ID], "succeeded", "run"),
    (["list"], "succeeded", "credentials"),
    (["doctor"], "succeeded", "doctor"),
    (["due"], "succeeded", "due"),
    (["due", "--confirm"], "succeeded", "run"),
    (["nosuch"], "succeeded", "error"),
    (["dragonfly", "--timeout", "soon"], "succeeded", "error"),
    (["lab", "status"], "succeeded", "lab-status"),
    (["lab", "fault", "eso-stall"], "succeeded", "lab-faults"),
])
def test_every_json_document_has_api_version_and_kind(args: list[str], outcome: str,
                                                      kind: str) -> None:
    result = invoke([*args, "-o", "json"], FakeEngine(outcome=outcome), lab=FakeLab())
    doc = json.loads(result.stdout)
    assert list(doc)[:2] == ["apiVersion", "kind"]
    assert doc["apiVersion"] == API_VERSION == "rotate/v1"
    assert doc["kind"] == kind


def test_a_document_without_kind_cannot_be_printed() -> None:
    with pytest.raises(ValueError, match="kind"):
        versioned({"runs": []})
    assert versioned({"x": 1, "kind": "runs", "apiVersion": "old"}) == {
        "apiVersion": "rotate/v1", "kind": "runs", "x": 1}


def _report(path: Path) -> dict[str, Any]:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = json.loads(path.read_text())
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize(("args", "outcome", "code", "kind"), [
    (["dragonfly", "--confirm"], "succeeded", 0, "run"),
    (["dragonfly", "--confirm"], "failed", 15, "run"),
    (["dragonfly", "--confirm"], "interrupted", 130, "run"),
    (["dragonfly", "--confirm"], "lock", 4, "error"),
    (["dragonfly", "--confirm"], "bug", 1, "error"),
    (["dragonfly", "--confirm"], "preflight", 3, "plan"),
    (["resume", RUN_ID, "--confirm"], "failed", 15, "run"),
    (["rollback", RUN_ID, "--confirm"], "succeeded", 0, "run"),
    (["dragonfly"], "succeeded", 0, "plan"),
])
def test_report_file_is_the_json_document_whatever_the_outcome(
        tmp_path: Path, args: list[str], outcome: str, code: int, kind: str) -> None:
    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    text = invoke([*args, "--report-file", str(target)], FakeEngine(outcome=outcome))
    assert text.exit_code == code
    doc = _report(target)
    assert doc["apiVersion"] == "rotate/v1" and doc["kind"] == kind
    if kind in ("run", "error"):
        assert doc["exit_code"] == code
    target.unlink()
    as_json = invoke([*args, "-o", "json", "--report-file", str(target)],
                     FakeEngine(outcome=outcome))
    assert as_json.exit_code == code
    assert _report(target) == json.loads(as_json.stdout) == doc
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]  # no temp left


def test_report_file_replaces_a_readable_file_with_a_private_one(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o644)
    result = invoke(["dragonfly", "--confirm", "--report-file", str(target)],
                    FakeEngine(outcome="failed"))
    assert result.exit_code == 15
    doc = _report(target)
    assert doc["status"] == "failed" and doc["resume"] == f"rotate resume {RUN_ID} --confirm"


@pytest.mark.parametrize("where", ["missing/report.json", "."])
def test_report_file_problems_are_usage_errors_before_anything_runs(where: str) -> None:
    engine = FakeEngine()
    result = invoke(["dragonfly", "--confirm", "--report-file", where], engine)
    assert result.exit_code == 2
    assert "--report-file" in result.stderr
    assert engine.calls == []
