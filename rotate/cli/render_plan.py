"""How a plan looks (``rotate CRED`` without ``--confirm``, ``rotate due --plan``): its head
(strategy, backend, providers, consumers, waves), preflight checks, traps and steps grouped
by stage, and the one command that runs it.

As every view (rotate.cli.render): a rich Table on a terminal, plain aligned lines
otherwise, both built from the same rows; names, versions and messages only, never a value.
The JSON form is :meth:`Plan.to_json`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rotate.cli.columns import aligned, check_mark, new_table, stage_label
from rotate.cli.console import Console

if TYPE_CHECKING:
    from rotate.engine.model import Plan, PlannedStep


def group_label(steps: Sequence[PlannedStep], i: int) -> str:
    """The label of the stage group starting at ``steps[i]``.  A group the plan runs ahead of
    a lower stage of the same phase (restart strategy: consumers prepared while ESO syncs,
    before the provider switches — chain.md "Order") says so, and so does the sync group
    they run beside."""
    step = steps[i]
    before = steps[i - 1] if i else None
    if (before is not None and step.stage == 2 and before.stage > step.stage
            and before.phase == step.phase):
        return f"{stage_label(step.stage)} (beside the {stage_label(before.stage)} steps above)"
    after = next((s for s in steps[i + 1:] if s.stage != step.stage), None)
    switch_after = any(s.stage == 3 and s.phase == step.phase for s in steps[i + 1:])
    if (after is None or after.stage >= step.stage or after.phase != step.phase
            or not switch_after):  # e.g. the run's last proof, ① backend.confirm
        return stage_label(step.stage)
    if after.stage == 3:
        return (f"{stage_label(step.stage)}, prepared before {stage_label(after.stage)} "
                "(new pods wait unready for it)")
    return (f"{stage_label(step.stage)}, prepared during {stage_label(after.stage)}, before "
            f"{stage_label(3)} (new pods wait unready for it)")


#: the widest list value on one line of the plain-text plan head; longer lists continue on
#: the next lines, under the value (a 100-consumer list was one 1,500-character line)
HEAD_WIDTH = 88


def _plan_head(plan: Plan) -> list[tuple[str, str]]:
    version = "absent" if plan.current_version is None else str(plan.current_version)
    reason = [("strategy", plan.strategy_reason)] if plan.strategy_reason else []
    adopt = [("adopt", plan.adopt.detail)] if plan.adopt is not None else []
    backends = [("backend", f"{plan.backend_path} (current version {version})")]
    if plan.members:  # several credentials: each one's backend
        backends = [("backend" if i == 0 else "",
                     f"{m.credential}: {m.backend_path} (current version "
                     + ("absent" if m.current_version is None else str(m.current_version))
                     + ")") for i, m in enumerate(plan.members)]
    return [
        *reason,
        *backends,
        *adopt,
        *_listed("providers", list(plan.providers)),
        *_listed("consumers", list(plan.consumers), " (derived from the chain file)"),
        *[("reads Secret" if i == 0 else "", f"{ref}: {words}")
          for i, (ref, words) in enumerate(plan.readers.items())],
        *_waves(plan),
    ]


def _waves(plan: Plan) -> list[tuple[str, str]]:
    """``waves   1 cart (canary, bake 30s) · 2 order, user``: the order consumers move in."""
    if not plan.waves:
        return []
    bake = plan.canary.get("bake_seconds") if plan.canary is not None else None
    parts = [f"{i} {', '.join(wave)}" + (f" (canary, bake {bake:g}s)"
                                          if i == 1 and bake is not None else "")
             for i, wave in enumerate(plan.waves, start=1)]
    return [("waves", " · ".join(parts))]


def _listed(label: str, names: list[str], suffix: str = "") -> list[tuple[str, str]]:
    """``label`` and every name, comma-separated; continued on further rows (label blank)
    once a row would pass :data:`HEAD_WIDTH`: each name whole, none left out."""
    if not names:
        return [(label, "none" + suffix)]
    rows: list[str] = []
    for i, name in enumerate(names):
        piece = name + ("," if i < len(names) - 1 else suffix)
        if rows and len(rows[-1]) + 1 + len(piece) <= HEAD_WIDTH:
            rows[-1] += " " + piece
        else:
            rows.append(piece)
    return [(label if i == 0 else "", row) for i, row in enumerate(rows)]


def _plan_footer(plan: Plan) -> list[str]:
    if plan.adopt is not None and plan.adopt.noop:
        return [f"Nothing to adopt: {plan.adopt.detail}. Nothing was changed."]
    adopt = " --adopt" if plan.adopt is not None else ""
    if plan.ok:
        return ["Preflight passed. Nothing was changed.",
                f"To run these {len(plan.steps)} steps: rotate {_named(plan)}{adopt} --confirm"
                + (f" --strategy {plan.strategy.value}" if plan.strategy_given else "")]
    return ["Preflight failed: nothing was changed. Fix the FAIL lines above and plan again."]


def _named(plan: Plan) -> str:
    """The credentials as the command line names them."""
    return " ".join(plan.credentials)


def _step_cells(plan: Plan, step: PlannedStep) -> tuple[str, ...]:
    """A step's kind, target and detail — after its credential in a run of several."""
    cells = (step.kind, step.target, step.detail)
    return (step.credential, *cells) if plan.members else cells


def plan_lines(plan: Plan) -> list[str]:
    lines = [f"Plan: rotate {_named(plan)} (strategy {plan.strategy})"]
    lines += aligned(_plan_head(plan))
    if plan.adopt is not None and plan.adopt.noop:  # nothing checked, nothing to run
        return [*lines, "", *_plan_footer(plan)]
    lines += ["", "Preflight"]
    lines += aligned([(check_mark(c), c.check, c.detail) for c in plan.preflight]) or [
        "  (no checks)"]
    if plan.traps:
        lines += ["", "Traps (what rotate will do)"]
        lines += aligned([(t.name, t.target, t.problem,
                           "→ " + t.action + (" (blocking)" if t.blocking else ""))
                          for t in plan.traps])
    lines += ["", "Steps"]
    rows = aligned([(str(s.index).rjust(3), *_step_cells(plan, s)) for s in plan.steps],
                   indent="  ")
    stage = None
    for i, (step, row) in enumerate(zip(plan.steps, rows, strict=True)):
        if step.stage != stage:
            stage = step.stage
            lines.append("  " + group_label(plan.steps, i))
        lines.append(row)
    return [*lines, "", *_plan_footer(plan)]


def plan_tables(plan: Plan) -> list[Any]:
    head = new_table(f"Plan: rotate {_named(plan)} (strategy {plan.strategy})", ["", ""])
    head.show_header = False
    head.columns[1].no_wrap = False  # the strategy's reason is prose; the labels stay whole
    for key, value in _plan_head(plan):
        head.add_row(key, value)
    if plan.adopt is not None and plan.adopt.noop:  # nothing checked, nothing to run
        return [head]
    checks = new_table("Preflight", ["", "check", "detail"])
    for c in plan.preflight:
        style = None if c.ok else ("bold red" if c.fatal else "yellow")
        checks.add_row(check_mark(c), c.check, c.detail, style=style)
    out: list[Any] = [head, checks]
    if plan.traps:
        traps = new_table("Traps (what rotate will do)", ["trap", "target", "problem", "action"])
        for t in plan.traps:
            traps.add_row(t.name, t.target, t.problem,
                          t.action + (" (blocking)" if t.blocking else ""),
                          style="bold red" if t.blocking else None)
        out.append(traps)
    steps = new_table("Steps", ["#", "stage", *(["credential"] if plan.members else []), "step",
                             "target", "detail"])
    for i, step in enumerate(plan.steps):
        last_of_stage = i + 1 == len(plan.steps) or plan.steps[i + 1].stage != step.stage
        first = i == 0 or plan.steps[i - 1].stage != step.stage
        steps.add_row(str(step.index), group_label(plan.steps, i) if first else "",
                      *_step_cells(plan, step), end_section=last_of_stage)
    out.append(steps)
    return out


def show_plan(console: Console, plan: Plan) -> None:
    console.document(plan.to_json())
    if console.json_mode:
        return
    if console.result_is_terminal:
        for table in plan_tables(plan):
            console.render(table)
            console.lines([""])
        console.lines(_plan_footer(plan))
    else:
        console.lines(plan_lines(plan))
