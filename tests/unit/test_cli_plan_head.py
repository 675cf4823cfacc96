"""The plain-text plan head names every consumer, on lines a terminal can show: a long list
continues under its value instead of making one 1,500-character line."""

from __future__ import annotations

from rotate.cli.render_plan import HEAD_WIDTH, plan_lines
from rotate.core.strategy import Strategy
from rotate.engine.model import Plan


def _plan(consumers: list[str]) -> Plan:
    return Plan(credential="dragonfly", strategy=Strategy.restart, consumers=tuple(consumers),
                providers=("deployment/dragonfly/dragonfly",),
                backend_path="secret/infra/dragonfly#password", current_version=3,
                preflight=(), traps=(), steps=())


def _head(lines: list[str]) -> list[str]:
    return lines[1:lines.index("")]


def test_a_short_list_stays_on_one_line() -> None:
    head = _head(plan_lines(_plan(["cart", "order", "user"])))
    assert head == ["  backend    secret/infra/dragonfly#password (current version 3)",
                    "  providers  deployment/dragonfly/dragonfly",
                    "  consumers  cart, order, user (derived from the chain file)"]


def test_a_long_list_continues_under_its_value_and_keeps_every_name() -> None:
    names = ["cart", "order", "user", *(f"consumer-{i:03d}" for i in range(4, 101))]
    head = _head(plan_lines(_plan(names)))
    rows = head[2:]
    assert rows[0].startswith("  consumers  ") and len(rows) > 5
    assert all(r.startswith("  " + " " * len("consumers") + "  ") for r in rows[1:])
    assert max(len(r) for r in rows) <= len("  consumers  ") + HEAD_WIDTH
    text = " ".join(r[len("  consumers  "):] for r in rows)
    assert text == ", ".join(names) + " (derived from the chain file)"


def test_the_command_to_run_a_plan_keeps_a_strategy_given_on_the_command_line() -> None:
    """`rotate dragonfly --strategy restart` must not end with a command that runs the
    chain's strategy instead (the lab's dragonfly: overlap by default)."""
    from dataclasses import replace

    chain_s = plan_lines(_plan(["cart"]))[-1]
    given = plan_lines(replace(_plan(["cart"]), strategy_given=True))[-1]
    assert chain_s == "To run these 0 steps: rotate dragonfly --confirm"
    assert given == "To run these 0 steps: rotate dragonfly --confirm --strategy restart"
