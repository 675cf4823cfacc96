"""The run report: a view of the journal (cli.md "Run report"), for a run of one
credential or of several (each member's backend versions beside the first's)."""

from __future__ import annotations

from typing import Any

from rotate.core.errors import EXIT_INTERNAL, EXIT_OK
from rotate.engine import journal as journal_mod
from rotate.engine.kinds import find
from rotate.engine.model import RunReport, StepRecord
from rotate.engine.next_commands import resume_command, rollback_command


def _backend(state: journal_mod.RunState) -> dict[str, Any]:
    """The backend path and the versions the run's value write went from and to."""
    wrote = [s for s in state.steps
             if s.status == "done" and (kind := find(s.step)) is not None and kind.writes_value]
    backend: dict[str, Any] = {"path": state.start.backend_path,
                               "previous_version": state.start.current_version,
                               "version": None}
    if wrote:
        backend["previous_version"] = wrote[0].data.get("previous_version")
        backend["version"] = wrote[0].data.get("version")
    return backend


def _first_member(state: journal_mod.RunState) -> journal_mod.RunState:
    from rotate.engine.merge import member_state

    return member_state(state, state.start.credentials[0])


def _members(state: journal_mod.RunState) -> list[dict[str, Any]]:
    """A run of several credentials: each one's consumers and backend versions."""
    from rotate.engine.merge import member_state

    out = []
    for name in state.start.credentials:
        mine = member_state(state, name)
        out.append({"credential": name, "consumers": list(mine.start.consumers),
                    "backend": _backend(mine)})
    return out


def report_from(state: journal_mod.RunState) -> RunReport:
    """The run report is a view of the journal (cli.md "Run report")."""
    steps = []
    failed = False
    undone_by = {old: new for new, old in state.undo_of.items()}
    for st in state.steps:
        status = st.status
        detail = st.detail or st.step.detail
        if status == "interrupted":
            status = "pending"
        elif status == "running":
            status = "failed" if state.status != "running" else "running"
        elif st.step.index in state.undone:
            # undone within the run: it runs again on resume
            status = "pending"
            detail = f"undone by step {undone_by[st.step.index]} (was: {detail})"
        failed = failed or status == "failed"
        steps.append(StepRecord(st.step.index, st.step.stage, st.step.kind, st.step.target,
                                status,  # type: ignore[arg-type]
                                st.started_at, st.finished_at, st.seconds, detail))
    backend = _backend(_first_member(state) if state.start.members else state)
    status = state.status
    exit_code = state.exit_code if state.exit_code is not None else (
        EXIT_OK if status in ("succeeded", "rolled-back") else EXIT_INTERNAL)
    resumable = status in ("failed", "interrupted", "running", "rollback-failed")
    extra: dict[str, Any] = {"operation": state.operation, "strategy": state.strategy,
                             "consumers": list(state.start.consumers)}
    if state.start.members:  # a one-credential run's report keeps the JSON it had
        extra["credentials"] = list(state.start.credentials)
        extra["members"] = _members(state)
    if state.start.of_run:
        extra["of_run"] = state.start.of_run
    if state.rolled_back_by:
        extra["rolled_back_by"] = state.rolled_back_by
    if state.events is not None:
        extra["events"] = state.events
    return RunReport(
        run_id=state.run_id, credential=state.credential,
        status=status,  # type: ignore[arg-type]
        exit_code=exit_code, started_at=state.started_at, finished_at=state.finished_at,
        backend=backend, steps=tuple(steps), message=state.message,
        resume=resume_command(state.run_id) if resumable else "",
        rollback=(rollback_command(state.run_id)
                  if state.operation == "rotate" and status != "rolled-back" else ""),
        extra=extra,
    )
