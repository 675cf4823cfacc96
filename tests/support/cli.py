"""Running the real CLI in-process against the fake engine (tests.fakes.engine), and the
golden files its output is compared with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.fakes.engine import FIXED_NOW, FakeEngine

#: the unit tests' golden files (tests/unit/golden), beside the tests that compare with them
GOLDEN = Path(__file__).resolve().parents[1] / "unit" / "golden"
BASE_ENV = {"NO_COLOR": "1", "COLUMNS": "100", "TTY_COMPATIBLE": None, "FORCE_COLOR": None,
            "TTY_INTERACTIVE": None, "ROTATE_DEBUG": None, "ROTATE_CHAIN": None,
            "ROTATE_STATE_DIR": None}


def invoke(args: list[str], engine: Any = None, *, lab: Any = None, input: str | None = None,
           env: dict[str, str | None] | None = None) -> Any:
    """Run ``rotate ARGS`` in-process through the real app, wired to the fakes."""
    from typer.testing import CliRunner

    from rotate.cli.app import app
    from rotate.cli.state import CliState

    engine = engine if engine is not None else FakeEngine()
    state = CliState(engine=lambda: engine, clock=lambda: FIXED_NOW, extra={"lab": lambda: lab})
    return CliRunner().invoke(app, args, input=input, env={**BASE_ENV, **(env or {})},
                              obj=state, catch_exceptions=False)


def check_golden(name: str, text: str) -> None:
    """Compare with tests/unit/golden/NAME; ROTATE_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("ROTATE_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path} (ROTATE_UPDATE_GOLDEN=1 writes it)"
    assert text == path.read_text(), f"output differs from {path}"


def confirm_with_stdin(stdin: bytes) -> tuple[Any, list[object]]:
    """``rotate dragonfly --confirm --value-stdin`` over the fake engine: the CLI's result and
    what the engine received."""
    from typer.testing import CliRunner

    from rotate.cli.app import app
    from rotate.cli.state import CliState

    engine = FakeEngine(outcome="succeeded")
    result = CliRunner().invoke(app, ["dragonfly", "--confirm", "--value-stdin"], input=stdin,
                                env=BASE_ENV, obj=CliState(engine=lambda: engine),
                                catch_exceptions=False)
    return result, [*engine.calls, *engine.received]
