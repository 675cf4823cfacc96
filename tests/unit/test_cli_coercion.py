"""The light option conversion (rotate/cli/coercion.py) gives what typer's own pydantic
conversion gives — the same value, or the same usage error — for every parameter of every
command it serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer._click import Context
from typer._click.exceptions import BadParameter
from typer.testing import CliRunner

from rotate.cli.app import app
from rotate.cli.coercion import LightCommand, light_runtime_param

# typer internals (the same in 0.29.0–0.29.2); test_cli_startup.py notices when they move
build_runtime_param = pytest.importorskip("typer._coercion").build_runtime_param

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
        for param in command.get_params(Context(command)):
            if light_runtime_param(param) is not None:
                out.append((f"{name} {param.name}", command, param))
    return out


def _outcome(runtime: Any, value: Any, param: Any, ctx: Context) -> tuple[str, Any]:
    try:
        return "value", runtime.coerce(value, param=param, ctx=ctx)
    except BadParameter as exc:
        return "error", exc.format_message()
    except Exception as exc:  # e.g. --timeout's parser given a Path: typer lets it through
        return "raised", f"{type(exc).__name__}: {exc}"


LIGHT = _light_params()


def test_the_common_options_are_lightened() -> None:
    names = {name for name, _, _ in LIGHT}
    assert {"list chain", "list output", "list state_dir", "rotate strategy",
            "rotate confirm", "doctor context", "rotate max_parallel", "rotate timeout"} <= names


@pytest.mark.parametrize(("name", "command", "param"), LIGHT, ids=[n for n, _, _ in LIGHT])
def test_light_conversion_is_typers(name: str, command: Any, param: Any) -> None:
    ctx = Context(command)
    light = light_runtime_param(param)
    own = build_runtime_param(param.type_descriptor)
    for value in SAMPLES:
        got, want = _outcome(light, value, param, ctx), _outcome(own, value, param, ctx)
        assert got == want, (name, value)
        assert type(got[1]) is type(want[1]), (name, value)


def test_a_bad_choice_reads_as_typer_words_it() -> None:
    result = CliRunner().invoke(app, ["list", "-o", "xml"], env={"NO_COLOR": "1"})
    assert result.exit_code == 2
    assert "Invalid value for '-o' / '--output': Value error, 'xml' is not one of 'text', " \
           "'json'." in result.stderr
