"""Bad input through the real CLI and the real engine facade, with no cluster: what `rotate
CRED` refuses, `rotate list` refuses too; a hostile `--value-stdin` is refused with exit 2
before anything is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rotate.cli.app import app
from tests.support.cli import confirm_with_stdin
from tests.support.paths import EXAMPLE_CHAIN, SHOP_DATA

EXAMPLE = EXAMPLE_CHAIN
ENV = {"NO_COLOR": "1", "COLUMNS": "200", "ROTATE_CHAIN": None, "ROTATE_STATE_DIR": None,
       "KUBECONFIG": None, "BAO_ADDR": None, "VAULT_ADDR": None}


def _rotate(*args: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=ENV, input=stdin, catch_exceptions=False)


def defective_chain(tmp_path: Path, old: str, new: str) -> Path:
    """The example with one edit, placed so that its relative schema paths still resolve."""
    (tmp_path / "schemas").symlink_to(SHOP_DATA / "schemas")
    text = EXAMPLE.read_text()
    assert old in text
    path = tmp_path / "examples" / "ecommerce" / "rotate.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(("old", "new", "problem"), [
    ("        user: default\n", "        user: default\n    strategy: sideways\n",
     "/credentials/dragonfly/strategy: 'sideways' is not one of: restart, overlap"),
    ("        user: default\n", "        user: default\n    typo: 1\n",
     "/credentials/dragonfly/typo: unknown field 'typo'"),
    ("  maxParallel: 10\n", "  maxParallel: 0\n", "/defaults/maxParallel: must be at least 1"),
    ("redis://:{/dragonfly/password}@", "redis://:{/dragonfly/password@",
     "/services/cart/values/~1dragonfly~1url/template: placeholder {/dragonfly/password@ "
     "is not closed before the next '{'"),
])
def test_list_refuses_what_rotate_refuses(
    tmp_path: Path, old: str, new: str, problem: str
) -> None:
    chain = defective_chain(tmp_path, old, new)
    state = str(tmp_path / "state")
    rotated = _rotate("dragonfly", "--chain", str(chain), "--state-dir", state)
    listed = _rotate("list", "--chain", str(chain), "--state-dir", state)
    assert rotated.exit_code == 2, rotated.output
    assert problem in rotated.stderr
    assert listed.exit_code == 2, listed.output
    assert problem in listed.stderr


# --------------------------------------------------------------------------- --value-stdin


@pytest.mark.usefixtures("in_chain_dir")
@pytest.mark.parametrize(("stdin", "reason"), [
    (b"caf\xe9-latin1-password\n", "not valid UTF-8 (at byte 3)"),
    (b"\xff\xfe" + "utf16".encode("utf-16-le") + b"\n", "not valid UTF-8 (at byte 0)"),
    (b"abc\x00def-ghijklmnop\n", "a control character (U+0000) at character 4"),
    (b"abc\x1b[31mdef-ghijkl\n", "a control character (U+001B) at character 4"),
    (b"tab\tinside-the-value\n", "a control character (U+0009) at character 4"),
    (b"x" * (64 * 1024 + 1) + b"\n", "longer than 65536 bytes"),
    (b"x" * (3 << 20), "longer than 65536 bytes"),
    (b"\n", "empty value"),
    (b"", "empty value"),
])
def test_hostile_value_stdin_is_refused_before_the_engine_is_called(
    stdin: bytes, reason: str
) -> None:
    result, engine_saw = confirm_with_stdin(stdin)
    assert result.exit_code == 2, result.output
    assert reason in result.stderr
    assert engine_saw == []
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("in_chain_dir")
@pytest.mark.parametrize("value", ["p@ss:w/rd %?# é ünïcødé", "x" * (64 * 1024)])
def test_unusual_but_valid_values_reach_the_engine_intact(value: str) -> None:
    from rotate.core.secret import Secret

    result, engine_saw = confirm_with_stdin(value.encode() + b"\r\n")
    assert result.exit_code == 0, result.output
    assert Secret(value) in engine_saw


# --------------------------------------------------------------------------- the state dir


@pytest.mark.parametrize("command", [["runs"], ["list", "--chain", str(EXAMPLE)]])
def test_a_state_dir_that_is_a_file_exits_2(tmp_path: Path, command: list[str]) -> None:
    not_a_dir = tmp_path / "state"
    not_a_dir.write_text("")
    result = _rotate(*command, "--state-dir", str(not_a_dir))
    assert result.exit_code == 2, result.output
    assert f"state directory {not_a_dir} is not a directory" in result.stderr


# --------------------------------------------------------------------------- reports


def _journal_of(state: Path, run_id: str, operation: str, current: int | None,
                steps: list[dict[str, object]], end: dict[str, object]) -> None:
    import json

    path = state / "runs" / run_id / "journal.jsonl"
    path.parent.mkdir(parents=True)
    records = [{"ts": "2026-12-03T07:00:00Z", "event": "run.start",
                "data": {"run_id": run_id, "credential": "dragonfly", "operation": operation,
                         "backend_path": "secret/infra/dragonfly", "current_version": current,
                         "steps": steps}},
               {"ts": "2026-12-03T07:00:05Z", "event": "run.end", "data": end}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.parametrize(("operation", "current", "shown"), [
    ("rollback", None, "secret/infra/dragonfly  nothing written"),
    ("rotate", 7, "secret/infra/dragonfly  version 7 (nothing written)"),
])
def test_a_run_that_wrote_nothing_does_not_show_none_versions(
    tmp_path: Path, operation: str, current: int | None, shown: str
) -> None:
    run_id = "20261203T070000Z-dragonfly-0001"
    step = {"index": 1, "stage": 1, "kind": "backend.write",
            "target": "secret/infra/dragonfly#password"}
    _journal_of(tmp_path, run_id, operation, current, [step] if operation == "rotate" else [],
                {"status": "succeeded" if operation == "rollback" else "failed",
                 "exit_code": 0 if operation == "rollback" else 10,
                 "message": "nothing to roll back"})
    result = _rotate("show", run_id, "--state-dir", str(tmp_path))
    assert "None" not in result.output
    assert shown in result.output


def test_resume_reads_the_value_again_from_stdin(in_chain_dir: None) -> None:
    """``rotate resume RUN --confirm --value-stdin`` hands the engine the value (issue 10)."""
    from rotate.cli.state import CliState
    from rotate.core.secret import Secret
    from tests.fakes.engine import RUN_ID, FakeEngine
    from tests.support.cli import BASE_ENV
    engine = FakeEngine(outcome="succeeded")
    value = "given-again-0123456789abcdefghijklmnop"
    result = CliRunner().invoke(app, ["resume", RUN_ID, "--confirm", "--value-stdin"],
                                input=value.encode() + b"\n", env=BASE_ENV,
                                obj=CliState(engine=lambda: engine), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert [v.reveal() for v in engine.received if isinstance(v, Secret)] == [value]
    assert value not in result.output
    refused = CliRunner().invoke(app, ["rollback", RUN_ID, "--confirm", "--value-stdin"],
                                 env=BASE_ENV, obj=CliState(engine=lambda: engine))
    assert refused.exit_code == 2  # rollback has no --value-stdin
