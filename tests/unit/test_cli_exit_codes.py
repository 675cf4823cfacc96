"""Exit codes, stdout/stderr discipline, secrets and signals of the real CLI (fake engine)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from rotate.core.secret import Secret
from tests.fakes.engine import RUN_ID, FakeEngine
from tests.support.cli import invoke

VALUE = "Zq9-very-secret-value-from-stdin-7Hk2"


@pytest.fixture(autouse=True)
def _chain_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "rotate.yaml").write_text("ok\n")
    (tmp_path / "broken.yaml").write_text("broken\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path


@pytest.mark.parametrize(("args", "engine", "code"), [
    (["dragonfly"], FakeEngine(), 0),
    (["dragonfly", "--dry-run"], FakeEngine(), 0),
    (["dragonfly"], FakeEngine(plan_ok=False), 3),
    (["dragonfly", "--confirm"], FakeEngine(outcome="preflight"), 3),
    (["dragonfly", "--confirm"], FakeEngine(outcome="lock"), 4),
    (["dragonfly", "--confirm"], FakeEngine(outcome="succeeded"), 0),
    (["dragonfly", "--confirm"], FakeEngine(outcome="failed"), 15),
    (["dragonfly", "--confirm"], FakeEngine(outcome="interrupted"), 130),
    (["dragonfly", "--confirm"], FakeEngine(outcome="bug"), 1),
    (["dragonfly", "--adopt", "--confirm"], FakeEngine(outcome="nothing-to-adopt"), 0),
    (["dragonfly", "--adopt", "--confirm", "--value-stdin"], FakeEngine(), 2),
    (["resume", RUN_ID, "--confirm"], FakeEngine(outcome="failed"), 15),
    (["rollback", RUN_ID, "--confirm"], FakeEngine(outcome="succeeded"), 0),
    (["resume", RUN_ID], FakeEngine(), 0),
    (["nosuch"], FakeEngine(), 2),
    (["dragonfly", "--bogus"], FakeEngine(), 2),
    (["dragonfly", "--timeout", "5 minutes"], FakeEngine(), 2),
    (["dragonfly", "--strategy", "yolo"], FakeEngine(), 2),
    (["dragonfly", "--max-parallel", "0"], FakeEngine(), 2),
    (["dragonfly", "--confirm", "--dry-run"], FakeEngine(), 2),
    (["dragonfly", "--chain", "broken.yaml"], FakeEngine(), 2),
    (["dragonfly", "--chain", "absent.yaml"], FakeEngine(), 2),
    (["show", "no-such-run"], FakeEngine(), 2),
    (["show"], FakeEngine(), 2),
    (["doctor"], FakeEngine(), 0),
])
def test_exit_codes(args: list[str], engine: FakeEngine, code: int) -> None:
    result = invoke(args, engine)
    assert result.exit_code == code, (result.stdout, result.stderr)


def test_unknown_credential_and_invalid_chain_explain_themselves() -> None:
    result = invoke(["nosuch"])
    assert "unknown credential 'nosuch'" in result.stderr
    result = invoke(["dragonfly", "--chain", "broken.yaml"])
    assert "broken.yaml:3: /credentials/dragonfly/backend: 'path' is a required property" \
        in result.stderr


def test_options_reach_the_engine(tmp_path: Path) -> None:
    engine = FakeEngine()
    result = invoke(["dragonfly", "--strategy", "overlap", "--max-parallel", "2", "--timeout",
                     "1m30s", "--context", "lab", "--kubeconfig", "kc", "--state-dir", "st",
                     "--take-over-lock"], engine)
    assert result.exit_code == 0
    options = engine.calls[0][1]
    assert (options.strategy, options.max_parallel, options.timeout, options.context,
            options.kubeconfig, options.state_dir, options.take_over_lock) == (
        "overlap", 2, 90.0, "lab", "kc", Path("st"), True)
    assert options.chain_file == Path("rotate.yaml")
    assert options.force is False
    engine = FakeEngine()
    assert invoke(["dragonfly", "--force"], engine).exit_code == 0
    assert engine.calls[0][1].force is True  # start although the last run is unfinished


def test_environment_defaults(tmp_path: Path) -> None:
    engine = FakeEngine()
    (tmp_path / "other.yaml").write_text("ok\n")
    result = invoke(["dragonfly"], engine, env={"ROTATE_CHAIN": "other.yaml",
                                                "ROTATE_STATE_DIR": "/srv/rotate"})
    assert result.exit_code == 0
    options = engine.calls[0][1]
    assert (options.chain_file, options.state_dir) == (Path("other.yaml"), Path("/srv/rotate"))
    engine = FakeEngine()
    invoke(["runs"], engine, env={"XDG_STATE_HOME": "/xdg"})
    assert engine.calls[0][1].state_dir == Path("/xdg/rotate")


@pytest.mark.parametrize("args", [
    ["dragonfly", "-o", "json"],
    ["dragonfly", "--output", "json", "--confirm"],
    ["dragonfly", "-o", "json", "--confirm"],
    ["runs", "-o", "json"],
    ["show", RUN_ID, "-o", "json"],
    ["list", "-o", "json"],
    ["doctor", "-o", "json"],
])
def test_json_is_one_document_on_stdout(args: list[str]) -> None:
    result = invoke(args, FakeEngine(outcome="failed"))
    doc = json.loads(result.stdout)  # exactly one document: json.loads rejects extra data
    assert isinstance(doc, dict)


def test_json_run_puts_progress_and_next_commands_on_stderr() -> None:
    result = invoke(["dragonfly", "--confirm", "-o", "json"], FakeEngine(outcome="failed"))
    assert result.exit_code == 15
    doc = json.loads(result.stdout)
    assert doc["kind"] == "run" and doc["exit_code"] == 15 and doc["status"] == "failed"
    assert doc["resume"] == f"rotate resume {RUN_ID} --confirm"
    assert "consumer.wait Deployment shop/cart … failed" in result.stderr
    assert f"rotate rollback {RUN_ID} --confirm" in result.stderr


@pytest.mark.parametrize(("outcome", "code"), [("lock", 4), ("preflight", 3), ("bug", 1)])
def test_json_errors_are_still_one_document(outcome: str, code: int) -> None:
    result = invoke(["dragonfly", "--confirm", "-o", "json"], FakeEngine(outcome=outcome))
    assert result.exit_code == code
    doc = json.loads(result.stdout)
    assert doc["kind"] in ("error", "plan")
    assert "error" in result.stderr


def test_text_result_on_stdout_progress_on_stderr() -> None:
    result = invoke(["dragonfly", "--confirm"], FakeEngine(outcome="succeeded"))
    assert result.exit_code == 0
    assert result.stdout.startswith(f"Run {RUN_ID}  dragonfly  succeeded  (exit 0)")
    assert "2026-12-02T14:03:05Z  [1] backend.write" in result.stderr
    assert "backend.write" not in result.stdout.splitlines()[0]


def test_value_stdin_reaches_engine_as_secret_and_is_never_printed() -> None:
    engine = FakeEngine(outcome="failed")
    result = invoke(["dragonfly", "--confirm", "--value-stdin"], engine, input=VALUE + "\n")
    assert result.exit_code == 15
    assert engine.received == [Secret(VALUE)]
    assert isinstance(engine.received[0], Secret)
    assert VALUE not in result.stdout + result.stderr
    assert "•••• (" in result.stderr  # the engine's note rendered the mask


def test_value_stdin_in_exception_text_is_never_printed() -> None:
    result = invoke(["dragonfly", "--confirm", "--value-stdin", "-o", "json"],
                    FakeEngine(outcome="leak"), input=VALUE + "\n")
    assert result.exit_code == 1
    assert "internal error (a bug): builtins.RuntimeError" in result.stderr
    assert VALUE not in result.stdout + result.stderr
    assert json.loads(result.stdout)["error"] == "internal"


def test_debug_prints_the_traceback() -> None:
    result = invoke(["dragonfly", "--confirm"], FakeEngine(outcome="bug"),
                    env={"ROTATE_DEBUG": "1"})
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "some-internal-key" in result.stderr
    quiet = invoke(["dragonfly", "--confirm"], FakeEngine(outcome="bug"))
    assert "some-internal-key" not in quiet.stderr


@pytest.mark.parametrize("value", ["", "\n"])
def test_value_stdin_refuses_empty(value: str) -> None:
    engine = FakeEngine()
    result = invoke(["dragonfly", "--confirm", "--value-stdin"], engine, input=value)
    assert result.exit_code == 2
    assert "empty value" in result.stderr
    assert engine.calls == []


def test_value_stdin_not_read_when_planning() -> None:
    engine = FakeEngine()
    result = invoke(["dragonfly", "--value-stdin"], engine, input="")
    assert result.exit_code == 0  # the empty stdin was not read: it would be refused (exit 2)
    assert [name for name, _ in engine.calls] == ["plan"]
    assert engine.received == []


@pytest.mark.parametrize("outcome", ["interrupted", "signal-twice"])
def test_sigint_cancels_the_run_and_exits_130(outcome: str) -> None:
    before = signal.getsignal(signal.SIGINT)
    result = invoke(["dragonfly", "--confirm"], FakeEngine(outcome=outcome))
    assert result.exit_code == 130
    assert "SIGINT: stopping after the current step is journaled" in result.stderr
    assert ("SIGINT again" in result.stderr) == (outcome == "signal-twice")
    assert "abandoning: step 3 is journaled" in result.stderr
    assert f"rotate resume {RUN_ID} --confirm" in result.stderr
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored


@pytest.mark.parametrize(("verb", "act"), [("resume", "resume it"),
                                            ("rollback", "roll it back")])
def test_resume_without_confirm_changes_nothing(verb: str, act: str) -> None:
    engine = FakeEngine()
    result = invoke([verb, RUN_ID, "--state-dir", "my state"], engine)
    assert result.exit_code == 0
    assert [name for name, _ in engine.calls] == ["show"]
    # the command to act is exact: the location options typed are repeated
    assert (f"Nothing was changed. To {act}: rotate {verb} {RUN_ID} --confirm "
            "--state-dir 'my state'") in result.stderr


@pytest.mark.parametrize(("outcome", "code"), [("failed", 15), ("interrupted", 130)])
def test_live_progress_on_a_terminal(outcome: str, code: int) -> None:
    result = invoke(["dragonfly", "--confirm"], FakeEngine(outcome=outcome),
                    env={"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0"})
    assert result.exit_code == code
    assert "\x1b[?25l" in result.stderr  # a live view ran (cursor hidden)…
    assert "sync.wait" not in result.stderr  # …and made way for the report's table
    assert f"Run {RUN_ID}  dragonfly" in result.stdout
    as_json = invoke(["dragonfly", "--confirm", "-o", "json"], FakeEngine(outcome=outcome),
                     env={"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0"})
    assert as_json.exit_code == code
    assert "sync.wait" in as_json.stderr  # no table follows: the live view stays
    assert json.loads(as_json.stdout)["exit_code"] == code


def test_next_commands_repeat_the_location_options_typed() -> None:
    result = invoke(["dragonfly", "--confirm", "--chain", "rotate.yaml", "--state-dir",
                     "my state", "-o", "json"], FakeEngine(outcome="failed"))
    doc = json.loads(result.stdout)
    assert doc["resume"] == (f"rotate resume {RUN_ID} --confirm --chain rotate.yaml "
                             "--state-dir 'my state'")
    assert doc["rollback"].startswith(f"rotate rollback {RUN_ID} --confirm --chain")
    from_env = invoke(["dragonfly", "--confirm", "-o", "json"], FakeEngine(outcome="failed"),
                      env={"ROTATE_STATE_DIR": "st"})
    assert json.loads(from_env.stdout)["resume"] == f"rotate resume {RUN_ID} --confirm"


@pytest.mark.parametrize("args", [
    ["dragonfly", "-o", "json", "--timeout", "soon"],
    ["dragonfly", "--output=json", "--bogus"],
    ["dragonfly", "-o", "json", "--confirm", "--dry-run"],
    ["nosuch", "-o", "json"],
    ["show", "-o", "json"],
])
def test_json_usage_errors_are_one_document_too(args: list[str]) -> None:
    result = invoke(args)
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert (doc["kind"], doc["exit_code"]) == ("error", 2)
    assert result.stderr.strip()  # the usage or the message, for the human


def test_a_value_typed_into_argv_is_refused_without_being_echoed() -> None:
    result = invoke(["dragonfly", "--confirm", VALUE])
    assert result.exit_code == 2
    assert "--value-stdin" in result.stderr
    assert VALUE not in result.stdout + result.stderr


def test_nothing_to_adopt_says_so_and_passes_adopt_to_the_engine() -> None:
    engine = FakeEngine(outcome="nothing-to-adopt")
    result = invoke(["dragonfly", "--adopt", "--confirm"], engine)
    assert result.exit_code == 0
    assert "Nothing to adopt: v8, the current version" in result.stdout
    assert engine.calls[-1][1].adopt
    result = invoke(["dragonfly", "--adopt", "--confirm", "-o", "json"], engine)
    doc = json.loads(result.stdout)
    assert (doc["kind"], doc["steps"], doc["adopt"]["noop"]) == ("plan", [], True)
