"""The exact commands that continue or undo a run, as every failure message, the report and
a notification name them: one spelling, so what a person copies is what the CLI takes."""

from __future__ import annotations


def resume_command(run_id: str) -> str:
    return f"rotate resume {run_id} --confirm"


def rollback_command(run_id: str) -> str:
    return f"rotate rollback {run_id} --confirm"
