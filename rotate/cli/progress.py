"""The engine Observer the CLI hands to run / resume / rollback. Always on stderr.

On a terminal: a rich Live table of the steps seen so far (the running one marked); it makes
way for the report's table when that goes to the same terminal, and stays otherwise.
Without a terminal: one plain, timestamped line when a step starts and one when it ends::

    2026-12-02T14:03:05Z  [2/14] sync.wait dragonfly/dragonfly-password …
    2026-12-02T14:03:05Z  [2/14] sync.wait dragonfly/dragonfly-password … done 0.84s

The start line matters in CI logs: when a wait hangs, the last line says on what.

The engine may call the observer from worker threads (parallel consumer rollouts), so every
method takes one lock. Nothing here holds or prints a value: steps carry names only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rotate.cli.console import Console
from rotate.core.timestamps import rfc3339

if TYPE_CHECKING:
    from rotate.engine.model import PlannedStep, StepRecord


class PlainProgress:
    """Timestamped lines, for logs and pipes."""

    def __init__(self, console: Console, clock: Callable[[], datetime],
                 total: int | None = None) -> None:
        self._console = console
        self._clock = clock
        self.total = total
        self._lock = threading.Lock()

    def _where(self, step: PlannedStep) -> str:
        count = f"{step.index}/{self.total}" if self.total else str(step.index)
        return f"[{count}] {step.kind} {step.target}"

    def _line(self, text: str) -> None:
        self._console.note(f"{rfc3339(self._clock(), micro=False)}  {text}")

    def set_total(self, total: int) -> None:
        """Optional hook: the engine may say how many steps the run has ("[2/14]")."""
        self.total = total

    def step_started(self, step: PlannedStep) -> None:
        with self._lock:
            self._line(f"{self._where(step)} …")

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None:
        took = "" if record.seconds is None else f" {record.seconds:.2f}s"
        detail = f" ({record.detail})" if record.status != "done" and record.detail else ""
        with self._lock:
            self._line(f"{self._where(step)} … {record.status}{took}{detail}")

    def note(self, text: str) -> None:
        with self._lock:
            self._line(text)

    def close(self) -> None:
        pass


class LiveProgress:
    """A rich Live view of the steps; the engine's notes print above it."""

    def __init__(self, console: Console, clock: Callable[[], datetime],
                 total: int | None = None) -> None:
        from rich.live import Live

        self._console = console
        self._clock = clock
        self.total = total
        self._lock = threading.Lock()
        # index → (stage, kind, target, status, seconds); insertion order is display order
        self._rows: dict[tuple[int, str], list[Any]] = {}
        # When the report table follows on the same terminal, the live view makes way for it.
        transient = console.result_is_terminal and not console.json_mode
        self._live = Live(self._table(), console=console.err, transient=transient,
                          refresh_per_second=8)
        self._live.start()

    def _table(self) -> Any:
        from rich import box
        from rich.spinner import Spinner
        from rich.table import Table

        from rotate.cli.render import stage_label

        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for column in ("#", "stage", "step", "target", "status", "time"):
            table.add_column(column)
        for (index, _), (stage, kind, target, status, seconds) in self._rows.items():
            shown: Any = Spinner("dots", text="running") if status == "running" else status
            style = {"failed": "bold red", "done": "green", "skipped": "dim"}.get(status)
            table.add_row(f"{index}/{self.total}" if self.total else str(index),
                          stage_label(stage), kind, target, shown,
                          "" if seconds is None else f"{seconds:.2f}s", style=style)
        return table

    def set_total(self, total: int) -> None:
        self.total = total

    def step_started(self, step: PlannedStep) -> None:
        with self._lock:
            self._rows[(step.index, step.target)] = [step.stage, step.kind, step.target,
                                                     "running", None]
            self._live.update(self._table())

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None:
        with self._lock:
            self._rows[(step.index, step.target)] = [step.stage, step.kind, step.target,
                                                     record.status, record.seconds]
            self._live.update(self._table())

    def note(self, text: str) -> None:
        with self._lock:
            self._live.console.print(f"{rfc3339(self._clock(), micro=False)}  {text}", markup=False,
                                     highlight=False)

    def close(self) -> None:
        with self._lock:
            self._live.update(self._table())
            self._live.stop()


Progress = PlainProgress | LiveProgress


def progress_for(console: Console, clock: Callable[[], datetime],
                 total: int | None = None) -> Progress:
    """Live view when stderr is a terminal, plain lines otherwise."""
    if console.progress_is_terminal:
        return LiveProgress(console, clock, total)
    return PlainProgress(console, clock, total)
