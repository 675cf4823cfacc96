"""How reports, run lists, doctor checks and credential lists look (plans: render_plan.py).

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

from rotate.cli.columns import aligned, check_mark, new_table, stage_label
from rotate.cli.console import Console
from rotate.cli.step_table import StepRow, steps_view

if TYPE_CHECKING:
    from rotate.core.errors import JournalUnreadable
    from rotate.engine.model import Check, RunReport, RunSummary, StepRecord


def _show_rows(console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A table on a terminal; aligned plain lines (header first) in a pipe."""
    if console.result_is_terminal:
        table = new_table(None, columns)
        for row in rows:
            table.add_row(*row)
        console.render(table)
    else:
        console.lines(aligned([columns, *rows], indent=""))


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}s"


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
        table = new_table(None, ["", "check", "detail"])
        for c in checks:
            table.add_row(check_mark(c), c.check, c.detail,
                          style=None if c.ok else ("bold red" if c.fatal else "yellow"))
        console.render(table)
    else:
        console.lines(aligned([(check_mark(c), c.check, c.detail) for c in checks],
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
