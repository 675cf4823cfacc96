"""The CLI over the real engine facade, for what needs no cluster: the chain file, the journal.

Exit codes and messages for an unknown credential and an invalid chain file, `list` and
`runs` — the same code paths an operator hits, with nothing faked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rotate.cli.app import app
from tests.support.paths import EXAMPLE_CHAIN

CHAIN = EXAMPLE_CHAIN
ENV = {"NO_COLOR": "1", "COLUMNS": "100", "ROTATE_CHAIN": None, "ROTATE_STATE_DIR": None,
       "KUBECONFIG": None, "BAO_ADDR": None, "VAULT_ADDR": None}


@pytest.fixture(autouse=True)
def _needs_engine() -> None:
    pytest.importorskip("rotate.engine.api", reason="the engine facade has not landed")


def _rotate(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=ENV, catch_exceptions=False)


def test_unknown_credential_is_a_usage_error(tmp_path: Path) -> None:
    result = _rotate("nosuch", "--chain", str(CHAIN), "--state-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "unknown credential 'nosuch'" in result.stderr


def test_invalid_chain_file_is_a_usage_error_with_line_and_path(tmp_path: Path) -> None:
    bad = tmp_path / "rotate.yaml"
    bad.write_text("apiVersion: rotate/v1\nkind: Chain\ncredentials:\n  dragonfly: {}\n")
    result = _rotate("dragonfly", "-o", "json", "--chain", str(bad), "--state-dir",
                     str(tmp_path))
    assert result.exit_code == 2
    assert "invalid chain file" in result.stderr
    assert str(bad) in result.stderr
    doc = json.loads(result.stdout)
    assert (doc["kind"], doc["error"], doc["exit_code"]) == ("error", "ChainFileError", 2)


def test_list_and_runs_from_the_example_chain(tmp_path: Path) -> None:
    listed = _rotate("list", "--chain", str(CHAIN), "--state-dir", str(tmp_path), "-o", "json")
    assert listed.exit_code == 0
    names = [c["name"] for c in json.loads(listed.stdout)["credentials"]]
    assert "dragonfly" in names
    runs = _rotate("runs", "--state-dir", str(tmp_path))
    assert runs.exit_code == 0
    assert runs.stdout == "No runs in the journal.\n"
    missing = _rotate("show", "20261202T000000Z-dragonfly-0000", "--state-dir", str(tmp_path))
    assert missing.exit_code == 2


def test_list_prints_the_same_from_the_validated_chain_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for output in ("text", "json"):
        args = ("list", "--chain", str(CHAIN), "--state-dir", str(tmp_path), "-o", output)
        cold, warm = _rotate(*args), _rotate(*args)
        assert cold.exit_code == warm.exit_code == 0
        assert warm.stdout == cold.stdout
        assert warm.stderr == cold.stderr == ""
    assert len(list((tmp_path / "xdg" / "rotate" / "chains").iterdir())) == 1
