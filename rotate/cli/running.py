"""Driving one changing engine operation (run, resume, rollback) from the CLI.

What this owns: the SIGINT/SIGTERM handlers, the progress observer's lifetime, printing the
report — with the resume/rollback commands completed by the location options the operator
typed (``--chain``, ``--state-dir``, ``--context``, ``--kubeconfig``) so they can be pasted as
is — and exiting with the report's exit code (cli.md "Exit codes").

Signals: the first SIGINT or SIGTERM calls ``CancelToken.cancel()``. The engine then
finishes or abandons the current step, journals it, and returns a report with status
``interrupted`` (exit 130) — so the run stays resumable. A second signal does not exit
early: leaving before the journal is written would make ``resume`` guess, so we only say
that we are still stopping. Handlers are installed only around the operation and restored
after it (and only in the main thread, where Python delivers signals).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

import typer

from rotate.cli.console import Console
from rotate.cli.options import repeat_args
from rotate.cli.progress import progress_for
from rotate.cli.render import show_report
from rotate.cli.state import state_of

if TYPE_CHECKING:
    from rotate.core.waiting import CancelToken
    from rotate.engine.model import Observer, RunReport

Operation = Callable[["Observer", "CancelToken"], "RunReport"]


@contextmanager
def interrupts(cancel: CancelToken, console: Console) -> Iterator[None]:
    """SIGINT/SIGTERM → ``cancel.cancel()`` for the duration of the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = 0

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        name = signal.Signals(signum).name
        if received == 1:
            cancel.cancel(f"interrupted by {name}")
            console.note(f"{name}: stopping after the current step is journaled "
                         "(the run stays resumable)")
        else:
            console.note(f"{name} again: still stopping; the journal must be written first")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def drive(ctx: typer.Context, console: Console, operation: Operation,
          total: int | None = None) -> NoReturn:
    """Run ``operation`` with progress and signal handling; print the report; exit its code."""
    from rotate.core.waiting import CancelToken

    state = state_of(ctx)
    cancel = CancelToken()
    progress = progress_for(console, state.clock, total)
    try:
        with interrupts(cancel, console):
            report = operation(progress, cancel)
    finally:
        progress.close()
    extra = repeat_args(ctx)
    if extra:
        report = replace(report, resume=f"{report.resume} {extra}" if report.resume else "",
                         rollback=f"{report.rollback} {extra}" if report.rollback else "")
    show_report(console, report)
    raise typer.Exit(report.exit_code)
