"""The light option conversion (rotate/cli/coercion.py) gives what typer's own pydantic
conversion gives — the same value, or a usage error of the same class, worded as typer words
it except for a choice or a whole number, whose pydantic phrases are replaced — for every
parameter of every command it serves; and the public names the CLI leans on are still what
it expects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.core import TyperArgument, TyperOption
from typer.testing import CliRunner

from rotate.cli.app import ClickUsageError, app
from rotate.cli.coercion import (
    LightArgument,
    LightCommand,
    LightOption,
    _wording,
    converter,
    lighten,
)

#: what pydantic says of a value, which a usage error must not repeat
PYDANTIC = ("Value error", "Input should", "unable to parse", "validation error")

SAMPLES: list[Any] = ["json", "JSON", "Text", "xml", "", "restart", "OVERLAP", "a.yaml",
                      "~/x/../y", " spaced ", "-", True, False, "yes", "0",
                      Path("p.yaml"), 3, None, "10", "0", "-3", "+4", " 5", "5.0", "1e3",
                      "٣", "007", 0, -1, 2**70, 1.5, "90s", "5m", "1h", "0s", "-5s", "later"]


def _light_params() -> list[tuple[str, Any, Any]]:
    """(command/param name, click command, parameter) for each lightened parameter."""
    root = typer.main.get_command(app)
    out = []
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        if not isinstance(command, LightCommand):
            continue
        params = command.get_params(typer.Context(command))
        lighten(params)
        out += [(f"{name} {param.name}", command, param) for param in params
                if isinstance(param, LightOption | LightArgument) and converter(param)]
    return out


def _outcome(process: Any, value: Any, param: Any, ctx: typer.Context) -> tuple[str, Any]:
    try:
        return "value", process(param, ctx, value)
    except ClickUsageError as exc:
        return "error", f"{type(exc).__name__}: {exc.format_message()}"
    except Exception as exc:  # e.g. --timeout's parser given a Path: typer lets it through
        return "raised", f"{type(exc).__name__}: {exc}"


LIGHT = _light_params()


def test_the_common_options_are_lightened() -> None:
    names = {name for name, _, _ in LIGHT}
    assert {"list chain", "list output", "list state_dir", "rotate strategy",
            "rotate confirm", "doctor context", "rotate max_parallel", "rotate timeout",
            "show run_id"} <= names


@pytest.mark.parametrize(("name", "command", "param"), LIGHT, ids=[n for n, _, _ in LIGHT])
def test_light_conversion_is_typers(name: str, command: Any, param: Any) -> None:
    ctx = typer.Context(command)
    own = (TyperOption if isinstance(param, TyperOption) else TyperArgument).process_value
    for value in SAMPLES:
        got = _outcome(type(param).process_value, value, param, ctx)
        want = _outcome(own, value, param, ctx)
        if want[0] == "error" and _wording(param) is not None:
            assert got[0] == "error", (name, value)
            assert got[1].split(":")[0] == want[1].split(":")[0], (name, value)
            assert not any(phrase in got[1] for phrase in PYDANTIC), (name, value, got)
            continue
        assert got == want, (name, value)
        assert type(got[1]) is type(want[1]), (name, value)


def test_an_unreadable_path_is_left_to_typer(tmp_path: Path) -> None:
    command = typer.main.get_command(app).commands["list"]  # type: ignore[attr-defined]
    params = command.get_params(typer.Context(command))
    lighten(params)
    chain = next(p for p in params if p.name == "chain")
    hidden = tmp_path / "hidden.yaml"
    hidden.write_text("x")
    hidden.chmod(0)
    ctx = typer.Context(command)
    try:
        assert _outcome(type(chain).process_value, str(hidden), chain, ctx) == \
            _outcome(TyperOption.process_value, str(hidden), chain, ctx)
    finally:
        hidden.chmod(0o600)


def test_the_usage_error_base_is_clicks() -> None:
    # rotate/cli/app.py reaches click's UsageError through typer's public BadParameter
    assert ClickUsageError.__name__ == "UsageError"
    assert issubclass(typer.BadParameter, ClickUsageError)
    assert ClickUsageError.exit_code == 2


def test_a_bad_choice_lists_the_choices_without_pydantic_text() -> None:
    result = CliRunner().invoke(app, ["list", "-o", "xml"], env={"NO_COLOR": "1"})
    assert result.exit_code == 2
    assert "Invalid value for '-o' / '--output': 'xml' is not one of 'text', 'json', " \
           "'yaml'." in result.stderr
    assert not any(phrase in result.stderr for phrase in PYDANTIC)
