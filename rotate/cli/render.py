"""How plans, reports, run lists, doctor checks and credential lists look.

Each view has two renderings of the same rows: a rich Table when the result goes to a
terminal, and plain aligned lines otherwise (pipes, CI logs, the golden tests). Keeping both
built from one row list means the piped output says exactly what the table says.

Only names, versions, timings and messages the engine marked safe reach this module — never
a value. The JSON forms are the engine model's ``to_json()``, versioned by the console
(docs/cli.md "JSON documents"); :meth:`Console.document` also hands them to ``--report-file``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rotate.cli.columns import aligned, stage_label
from rotate.cli.console import Console
from rotate.cli.step_table import StepRow, steps_view

if TYPE_CHECKING:
    from rich.table import Table

    from rotate.core.errors import JournalUnreadable
    from rotate.engine.model import Check, Plan, PlannedStep, RunReport, RunSummary, StepRecord

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


WRAPPING = frozenset({"detail", "problem", "action", "consumers", "provider(s)"})


def _table(title: str | None, columns: Sequence[str]) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False)
    for column in columns:
        # Names (targets, run ids, check ids) stay on one line; prose columns wrap.
        table.add_column(column, no_wrap=column not in WRAPPING)
    return table


def _show_rows(console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on a terminal; aligned plain lines (header first) in a pipe."""
    if console.result_is_terminal:
        table = _table(None, columns)
        for row in rows:
            table.add_row(*row)
        console.render(table)
    else:
        console.lines(aligned([columns, *rows], indent=""))


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}s"


def _check_mark(check: Check) -> str:
    if check.ok:
        return "ok"
    return "FAIL" if check.fatal else "warn"


# -- plan ----------------------------------------------------------------------------------
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
    lines += aligned([(_check_mark(c), c.check, c.detail) for c in plan.preflight]) or [
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
    head = _table(f"Plan: rotate {_named(plan)} (strategy {plan.strategy})", ["", ""])
    head.show_header = False
    head.columns[1].no_wrap = False  # the strategy's reason is prose; the labels stay whole
    for key, value in _plan_head(plan):
        head.add_row(key, value)
    if plan.adopt is not None and plan.adopt.noop:  # nothing checked, nothing to run
        return [head]
    checks = _table("Preflight", ["", "check", "detail"])
    for c in plan.preflight:
        style = None if c.ok else ("bold red" if c.fatal else "yellow")
        checks.add_row(_check_mark(c), c.check, c.detail, style=style)
    out: list[Any] = [head, checks]
    if plan.traps:
        traps = _table("Traps (what rotate will do)", ["trap", "target", "problem", "action"])
        for t in plan.traps:
            traps.add_row(t.name, t.target, t.problem,
                          t.action + (" (blocking)" if t.blocking else ""),
                          style="bold red" if t.blocking else None)
        out.append(traps)
    steps = _table("Steps", ["#", "stage", *(["credential"] if plan.members else []), "step",
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


# -- run report (run / resume / rollback / show) ----------------------------------------------
def _versions(b: dict[str, Any]) -> str:
    """``path  version 7 → 8``; a run that wrote nothing never shows ``None``."""
    prev, new = b.get("previous_version"), b.get("version")
    if new is None:
        return f"{b.get('path')}  " + (f"version {prev} (nothing written)" if prev is not None
                                       else "nothing written")
    if prev is None:
        return f"{b.get('path')}  created version {new}"
    return f"{b.get('path')}  version {prev} → {new}"


def _report_head(report: RunReport) -> list[str]:
    b = report.backend or {}
    versions = ""
    if b.get("path"):
        versions = _versions(b)
    lines = [f"Run {report.run_id}  {report.credential}  {report.status}  "
             f"(exit {report.exit_code})"]
    members = report.extra.get("members") or []
    backends = [("backend" if i == 0 else "", f"{m.get('credential')}: {_versions(m['backend'])}")
                for i, m in enumerate(members)] or [("backend", versions)]
    lines += aligned([(k, v) for k, v in (
        *backends,
        ("started", report.started_at or ""),
        ("finished", report.finished_at or ""),
        ("events", _events(report.extra.get("events")))) if v])
    return lines


def _events(counts: Any) -> str:
    """Kubernetes Events of the run: best effort, so failures are told, not fatal."""
    if not isinstance(counts, dict):
        return ""
    text = f"{counts.get('created', 0)} Kubernetes events"
    failed = counts.get("failed", 0)
    if failed:
        text += (f"; {failed} could not be created (best effort: check `create events` "
                 "with rotate doctor)")
    return text


def _step_row(s: StepRecord) -> tuple[str, ...]:
    return (str(s.index), stage_label(s.stage), s.kind, s.target, s.status,
            _seconds(s.seconds), s.detail)


def _report_footer(report: RunReport) -> list[str]:
    lines: list[str] = []
    if report.message:
        lines += ["", report.message]
    if report.status in ("failed", "interrupted", "rollback-failed") and (
            report.resume or report.rollback):
        lines.append("")
        lines += aligned([(k, v) for k, v in (
            ("resume:", report.resume), ("roll back:", report.rollback)) if v], indent="")
    return lines


def report_lines(report: RunReport) -> list[str]:
    lines = _report_head(report)
    lines += ["", "Steps"]
    lines += aligned([("#", "stage", "step", "target", "status", "time", "detail"),
                      *(_step_row(s) for s in report.steps)])
    return lines


def show_report(console: Console, report: RunReport) -> None:
    """The report on stdout (or the JSON); the failure paragraph and next commands on stderr.

    The way out of a failed run goes to stderr in every mode, so it reaches a human even when
    stdout is piped into a file or a JSON parser.
    """
    console.document(report.to_json())
    if console.json_mode:
        pass
    elif not console.result_is_terminal:
        console.lines(report_lines(report))
    else:
        console.lines(_report_head(report))
        rows = [StepRow(str(s.index), s.stage, s.kind, s.target, s.status, _seconds(s.seconds),
                        s.detail) for s in report.steps]
        console.render(steps_view(rows, console.out.width, "Steps"))
    for line in _report_footer(report):
        console.note(line)


# -- runs -----------------------------------------------------------------------------------
RUNS_COLUMNS = ("run id", "operation", "credential", "started", "status", "failed step")


def _run_row(r: RunSummary) -> tuple[str, ...]:
    return (r.run_id, r.operation, r.credential, r.started_at, r.status, r.failed_step or "")


def show_runs(console: Console, runs: Sequence[RunSummary],
              unreadable: Sequence[JournalUnreadable] = ()) -> None:
    """The runs; ``unreadable`` journals are in the JSON document only (the command names
    them on stderr)."""
    if console.json_mode:
        document: dict[str, Any] = {"kind": "runs", "runs": [
            dict(zip(("run_id", "operation", "credential", "started_at", "status",
                      "failed_step"),
                     (r.run_id, r.operation, r.credential, r.started_at, r.status,
                      r.failed_step), strict=True)) for r in runs]}
        if unreadable:
            document["unreadable"] = [{"run_id": u.run_id, "journal": u.path,
                                       "reason": u.reason} for u in unreadable]
        console.document(document)
        return
    if not runs and unreadable:
        return
    if not runs:
        console.lines(["No runs in the journal."])
        return
    _show_rows(console, RUNS_COLUMNS, [_run_row(r) for r in runs])


# -- doctor ---------------------------------------------------------------------------------
def doctor_footer(checks: Sequence[Check]) -> str:
    failed = [c for c in checks if not c.ok and c.fatal]
    warned = [c for c in checks if not c.ok and not c.fatal]
    if not failed:
        return f"All {len(checks)} checks passed" + (
            f" ({len(warned)} warning(s))." if warned else ".")
    return f"{len(failed)} of {len(checks)} checks failed."


def show_doctor(console: Console, checks: Sequence[Check]) -> None:
    if console.json_mode:
        console.document({"kind": "doctor", "ok": all(c.ok or not c.fatal for c in checks),
                      "checks": [c.to_json() for c in checks]})
        return
    if console.result_is_terminal:
        table = _table(None, ["", "check", "detail"])
        for c in checks:
            table.add_row(_check_mark(c), c.check, c.detail,
                          style=None if c.ok else ("bold red" if c.fatal else "yellow"))
        console.render(table)
    else:
        console.lines(aligned([(_check_mark(c), c.check, c.detail) for c in checks],
                              indent=""))
    console.lines(["", doctor_footer(checks)])


# -- list -----------------------------------------------------------------------------------
LIST_COLUMNS = ("credential", "provider(s)", "consumers", "last run")


def _names(value: Any) -> str:
    if isinstance(value, str):
        return value
    return ", ".join(str(v) for v in value or ()) or "-"


def _last_run(value: Any) -> str:
    if value is None:
        return "never"
    if isinstance(value, str):
        return value
    run_id, status = getattr(value, "run_id", ""), getattr(value, "status", "")
    return f"{run_id} {status}".strip()


def _credential_row(c: Any) -> tuple[str, ...]:
    return (str(c.name), _names(c.providers), _names(c.consumers),
            _last_run(getattr(c, "last_run", None)))


def _credential_json(c: Any) -> dict[str, Any]:
    to_json = getattr(c, "to_json", None)
    if callable(to_json):
        return dict(to_json())
    last = getattr(c, "last_run", None)
    return {"name": c.name, "providers": list(c.providers), "consumers": list(c.consumers),
            "last_run": last if last is None or isinstance(last, str) else _last_run(last)}


def show_list(console: Console, credentials: Sequence[Any]) -> None:
    if console.json_mode:
        console.document({"kind": "credentials",
                      "credentials": [_credential_json(c) for c in credentials]})
        return
    _show_rows(console, LIST_COLUMNS, [_credential_row(c) for c in credentials])
