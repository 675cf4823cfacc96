"""``rotate A B`` on the command line: several credentials as one run (rotate.engine.several),
parsed as further words of the one-credential command, over the fake engine."""

from __future__ import annotations

import dataclasses

import pytest

from rotate.cli.render_plan import plan_lines
from rotate.core.strategy import Strategy
from rotate.engine.model import Plan, PlannedStep
from tests.fakes.engine import FakeEngine, make_plan
from tests.support.cli import invoke

VALUE = "Zq9-typed-into-argv-by-mistake"

pytestmark = pytest.mark.usefixtures("in_chain_dir")


def test_further_words_are_further_credentials_of_one_plan() -> None:
    engine = FakeEngine()
    result = invoke(["dragonfly", "postgres"], engine)
    assert result.exit_code == 0, result.output
    assert [name for name, _ in engine.calls] == ["plan_several"]
    one = FakeEngine()
    assert invoke(["dragonfly"], one).exit_code == 0
    assert [name for name, _ in one.calls] == ["plan"]  # one credential: as before


def test_a_run_of_several_refuses_value_stdin_before_reading_it() -> None:
    result = invoke(["dragonfly", "postgres", "--confirm", "--value-stdin"],
                    FakeEngine(), input=VALUE + "\n")
    assert result.exit_code == 2
    assert "--value-stdin" in result.stderr and VALUE not in result.output


def test_a_word_that_is_no_credential_is_named_by_position_never_echoed() -> None:
    result = invoke(["dragonfly", "postgres", VALUE, "--confirm"], FakeEngine())
    assert result.exit_code == 2
    assert "word 3 of the 3" in result.stderr and "--value-stdin" in result.stderr
    assert VALUE not in result.stdout + result.stderr


def test_the_plan_of_several_names_each_steps_credential_and_the_command() -> None:
    base = make_plan()
    members = tuple(dataclasses.replace(base, credential=name, members=())
                    for name in ("dragonfly", "postgres"))
    steps = (PlannedStep(1, 1, "backend.write", "secret/infra/dragonfly#password",
                         credential="dragonfly"),
             PlannedStep(2, 1, "backend.write", "secret/infra/postgres#password",
                         credential="postgres"))
    plan = dataclasses.replace(base, credential="dragonfly+postgres", steps=steps,
                               members=members, strategy=Strategy.restart)
    text = "\n".join(plan_lines(plan))
    assert text.startswith("Plan: rotate dragonfly postgres (strategy restart)")
    assert "dragonfly  backend.write" in text and "postgres   backend.write" in text
    assert "To run these 2 steps: rotate dragonfly postgres --confirm" in text
    doc = plan.to_json()
    assert doc["credentials"] == ["dragonfly", "postgres"]
    assert [s["credential"] for s in doc["steps"]] == ["dragonfly", "postgres"]
    assert "credentials" not in base.to_json()  # a one-credential plan's JSON is unchanged
    assert isinstance(plan, Plan)
