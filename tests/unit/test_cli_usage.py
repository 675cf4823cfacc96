"""Usage lines, usage errors and output formats of every command, as a new user meets them.

Golden output under NO_COLOR=1, COLUMNS=100 (tests/support/cli.py); each golden file holds
several invocations, each under a ``$ rotate …`` header with its exit code, so one review
covers a whole family. Rewrite them with ROTATE_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from ruamel.yaml import YAML
from typer.testing import CliRunner

from rotate.cli.app import app
from tests.fakes.engine import RUN_ID, FakeEngine
from tests.fakes.lab import FakeLab
from tests.support.cli import check_golden, invoke

#: what must never reach a user: pydantic's and click's internals, Python type names
INTERNALS = ("Value error", "Input should", "unable to parse", "validation error",
             "Traceback", "<str>", "list[str]", "{RUN_ID}", "{CREDENTIAL}")

COMMANDS_HELP = ["list", "runs", "show", "resume", "rollback", "doctor", "rbac",
                 "vault-policy", "init", "lab", "lab up", "lab down", "lab status",
                 "lab fault"]


@pytest.fixture(autouse=True)
def _chain_dir(in_chain_dir: None) -> None:
    """Every test runs beside a ./rotate.yaml, with its own state directory."""


def _transcript(runs: list[tuple[str, Any]], stream: str) -> str:
    return "".join(f"$ rotate {args}  (exit {result.exit_code})\n{getattr(result, stream)}\n"
                   for args, result in runs)


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


# -- usage lines ------------------------------------------------------------------------------
def test_every_help_starts_with_its_usage_line() -> None:
    runs = [(f"{words} --help", invoke([*words.split(), "--help"], lab=FakeLab()))
            for words in COMMANDS_HELP]
    for words, result in runs:
        assert result.exit_code == 0, (words, result.stderr)
        command = words.removesuffix(" --help")
        assert _first_line(result.stdout).startswith(f"Usage: rotate {command} "), words
        assert not any(bad in result.stdout for bad in INTERNALS), (words, result.stdout)
    by_name = dict(runs)
    assert _first_line(by_name["show --help"].stdout) == "Usage: rotate show [OPTIONS] RUN_ID"
    assert _first_line(by_name["list --help"].stdout) == "Usage: rotate list [OPTIONS]"
    assert _first_line(by_name["lab fault --help"].stdout) == \
        "Usage: rotate lab fault [OPTIONS] [KIND] [TARGET]"
    check_golden("usage_help.txt", _transcript(runs, "stdout"))


USAGE_ERRORS = ["list --bogus", "runs --bogus", "doctor --bogus", "show", "show a b",
                "resume", "rollback --bogus", "rbac --bogus", "vault-policy --bogus",
                "init --bogus", "runs -o", "dragonfly -o", "dragonfly --chain",
                "lab status --bogus", "lab up --profile x", "lab up --with foo",
                "lab up --nice x", "dragonfly --strategy yolo", "dragonfly --max-parallel 0",
                "dragonfly --max-parallel abc", "--chain rotate.yaml", "-o json --confirm"]


def test_usage_errors_print_the_usage_line_and_no_internals() -> None:
    runs = [(words, invoke(words.split(), lab=FakeLab())) for words in USAGE_ERRORS]
    for words, result in runs:
        assert result.exit_code == 2, (words, result.stderr)
        assert result.stdout == "", words
        assert _first_line(result.stderr).startswith("Usage: rotate "), (words, result.stderr)
        assert "Try 'rotate" in result.stderr, words
        assert not any(bad in result.stderr for bad in INTERNALS), (words, result.stderr)
    check_golden("usage_errors.txt", _transcript(runs, "stderr"))


# -- -o json|yaml ----------------------------------------------------------------------------
def _yaml(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


#: every command with -o, and what it prints (the fake engine and the fake lab answer)
DOCUMENTS = [["list"], ["runs"], ["show", RUN_ID], ["doctor"], ["dragonfly"],
             ["dragonfly", "--confirm"], ["resume", RUN_ID], ["rollback", RUN_ID, "--confirm"],
             ["lab", "status"], ["lab", "up"], ["lab", "fault", "eso-stall"]]


@pytest.mark.parametrize("args", DOCUMENTS, ids=[" ".join(a) for a in DOCUMENTS])
def test_yaml_is_the_json_document_field_for_field(args: list[str]) -> None:
    as_json = invoke([*args, "-o", "json"], FakeEngine(), lab=FakeLab())
    as_yaml = invoke([*args, "-o", "yaml"], FakeEngine(), lab=FakeLab())
    assert as_yaml.exit_code == as_json.exit_code
    doc = json.loads(as_json.stdout)
    assert _yaml(as_yaml.stdout) == doc
    assert list(_yaml(as_yaml.stdout)) == list(doc)  # the same order: apiVersion, kind, …
    assert as_yaml.stderr == as_json.stderr


def test_yaml_golden() -> None:
    runs = [(f"{' '.join(args)} -o yaml", invoke([*args, "-o", "yaml"]))
            for args in (["list"], ["runs"], ["show", RUN_ID])]
    check_golden("output_yaml.txt", _transcript(runs, "stdout"))


def test_an_error_under_yaml_is_one_yaml_document() -> None:
    result = invoke(["dragonfly", "-o", "yaml", "--bogus"])
    assert result.exit_code == 2
    doc = _yaml(result.stdout)
    assert (doc["kind"], doc["error"], doc["exit_code"]) == ("error", "UsageError", 2)
    missing = invoke(["list", "-o", "yaml", "--chain", "absent.yaml"])
    assert missing.exit_code == 2
    assert _yaml(missing.stdout)["error"] == "UsageError"


@pytest.mark.parametrize("args", [["list"], ["runs"], ["show", RUN_ID], ["doctor"],
                                  ["dragonfly"], ["resume", RUN_ID], ["lab", "status"]])
def test_a_bad_output_lists_the_choices(args: list[str]) -> None:
    result = invoke([*args, "-o", "xml"], lab=FakeLab())
    assert result.exit_code == 2
    assert "Invalid value for '-o' / '--output': 'xml' is not one of 'text', 'json', " \
           "'yaml'." in result.stderr
    assert not any(bad in result.stderr for bad in INTERNALS)


def test_rbac_yaml_stays_manifests_and_its_errors_stay_off_stdout() -> None:
    bad = invoke(["rbac", "-o", "text"])
    assert bad.exit_code == 2
    assert "'text' is not one of 'yaml', 'json'." in bad.stderr
    missing = invoke(["rbac", "--chain", "absent.yaml"])
    assert (missing.exit_code, missing.stdout) == (2, "")  # never fed to kubectl apply
    bogus = invoke(["rbac", "-o", "yaml", "--bogus"])
    assert (bogus.exit_code, bogus.stdout) == (2, "")


# -- options before the credential or command -----------------------------------------------
@pytest.mark.parametrize(("before", "after"), [
    ("--chain rotate.yaml dragonfly", "dragonfly --chain rotate.yaml"),
    ("--chain=rotate.yaml -o json dragonfly --timeout 90s",
     "dragonfly --chain=rotate.yaml -o json --timeout 90s"),
    ("-ojson --max-parallel 3 dragonfly", "dragonfly -ojson --max-parallel 3"),
    ("--confirm --timeout 90s dragonfly", "dragonfly --confirm --timeout 90s"),
    ("--state-dir st -o json runs", "runs --state-dir st -o json"),
    ("-o yaml show " + RUN_ID, "show " + RUN_ID + " -o yaml"),
])
def test_options_may_come_before_the_credential(before: str, after: str) -> None:
    engine_before, engine_after = FakeEngine(), FakeEngine()
    first = invoke(before.split(), engine_before)
    second = invoke(after.split(), engine_after)
    assert first.exit_code == 0, first.stderr
    assert (first.exit_code, first.stdout, first.stderr) == \
        (second.exit_code, second.stdout, second.stderr)
    assert engine_before.calls == engine_after.calls


def test_an_option_before_the_credential_reaches_the_engine() -> None:
    engine = FakeEngine()
    result = invoke(["--chain", "rotate.yaml", "--timeout", "2m", "dragonfly"], engine)
    assert result.exit_code == 0, result.stderr
    (name, options), = engine.calls
    assert (name, options.chain_file, options.timeout) == ("plan", Path("rotate.yaml"), 120.0)


def test_an_option_name_means_the_same_on_every_command() -> None:
    """What lets ``rotate --chain f CRED`` skip an option's value before knowing the
    command: no option takes a value on one command and is a flag on another."""
    root = typer.main.get_command(app)
    kinds: dict[str, set[bool]] = {}
    for command in root.commands.values():  # type: ignore[attr-defined]
        for param in command.get_params(typer.Context(command)):
            if param.param_type_name == "option":
                for name in (*param.opts, *param.secondary_opts):
                    kinds.setdefault(name, set()).add(bool(param.is_flag or param.count))
    assert {name for name, seen in kinds.items() if len(seen) > 1} == set()


def test_root_options_and_unknown_words_are_left_alone() -> None:
    assert invoke(["--version"]).exit_code == 0
    bogus = invoke(["--bogus", "dragonfly"])
    assert bogus.exit_code == 2
    assert "No such option: --bogus" in bogus.stderr


# -- the chain file -------------------------------------------------------------------------
def test_a_missing_chain_file_says_where_and_how(tmp_path: Path) -> None:
    (tmp_path / "rotate.yaml").unlink()
    runs = [("list", invoke(["list"])),
            ("dragonfly --chain prod.yaml", invoke(["dragonfly", "--chain", "prod.yaml"])),
            ("rbac  (ROTATE_CHAIN=env.yaml)", invoke(["rbac"], env={"ROTATE_CHAIN": "env.yaml"})),
            ("--chain prod.yaml dragonfly --confirm",
             invoke(["--chain", "prod.yaml", "dragonfly", "--confirm"])),
            ("dragonfly  (the real engine)", CliRunner().invoke(
                app, ["dragonfly"], env={"NO_COLOR": "1", "COLUMNS": "100",
                                         "ROTATE_CHAIN": None}))]
    for words, result in runs:
        assert result.exit_code == 2, words
        assert "invalid chain file" not in result.stderr
        assert "--chain FILE or ROTATE_CHAIN=FILE" in result.stderr
        assert "rotate init" in result.stderr
    assert "neither --chain nor ROTATE_CHAIN is set" in runs[0][1].stderr
    assert f"looked for {tmp_path / 'rotate.yaml'}" in runs[0][1].stderr
    assert "given with --chain" in runs[1][1].stderr
    assert "given with ROTATE_CHAIN" in runs[2][1].stderr
    text = _transcript(runs, "stderr").replace(str(tmp_path), "/tmp/TEST")
    check_golden("chain_missing.txt", text)


def test_show_and_runs_do_not_need_the_chain_file(tmp_path: Path) -> None:
    (tmp_path / "rotate.yaml").unlink()
    assert invoke(["runs"]).exit_code == 0
    assert invoke(["show", RUN_ID]).exit_code == 0
    assert invoke(["resume", RUN_ID]).exit_code == 0  # shows the run only


# -- --timeout ------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "0s", "0m", "-5s"])
def test_a_timeout_must_be_more_than_zero(value: str) -> None:
    engine = FakeEngine()
    result = invoke(["dragonfly", "--confirm", "--timeout", value], engine)
    assert result.exit_code == 2
    assert "Invalid value for '--timeout'" in result.stderr
    assert engine.calls == []


def test_timeout_zero_golden() -> None:
    runs = [(f"dragonfly --timeout {v}", invoke(["dragonfly", "--timeout", v]))
            for v in ("0", "0s")]
    check_golden("timeout_zero.txt", _transcript(runs, "stderr"))


# -- the lab's chain file says what the code does ---------------------------------------------
def test_the_lab_chain_does_not_promise_to_create_the_lock_namespace() -> None:
    from tests.support.paths import EXAMPLE_CHAIN

    line = next(x for x in EXAMPLE_CHAIN.read_text().splitlines() if "lockNamespace:" in x)
    assert "must exist" in line and not re.search(r"created if missing", line)


def test_every_command_is_a_name_no_credential_may_take() -> None:
    """``rotate NAME`` runs the command NAME before any credential of that name: a credential
    named like a command could never be rotated, so the chain loader refuses those names."""
    from rotate.chain.model import RESERVED_CREDENTIAL_NAMES
    from rotate.cli.app import CREDENTIAL_COMMAND

    group = typer.main.get_command(app)
    commands = set(getattr(group, "commands", {})) - {CREDENTIAL_COMMAND}
    assert commands, "no commands found"
    assert commands <= set(RESERVED_CREDENTIAL_NAMES), commands - set(RESERVED_CREDENTIAL_NAMES)
