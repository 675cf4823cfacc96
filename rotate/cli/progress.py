"""The engine Observer the CLI hands to run / resume / rollback. Always on stderr.

On a terminal: a rich Live view of the steps seen so far (:mod:`rotate.cli.step_table`, so
it reads at 80 columns too); a running step shows its elapsed time, ticking, and its wait's
last observation (``2/3 pods available``).  It makes way for the report's table when that
goes to the same terminal, and stays otherwise.

Without a terminal: one plain, timestamped line when a step starts and one when it ends, and
while a step runs a heartbeat line every :data:`HEARTBEAT_SECONDS` with its elapsed time and
last observation::

    2026-12-02T14:03:05Z  [9/14] consumer.wait shop/cart …
    2026-12-02T14:03:15Z  [9/14] consumer.wait shop/cart … running 10s: 1/2 pods available
    2026-12-02T14:03:21Z  [9/14] consumer.wait shop/cart … done 16.02s

The start line matters in CI logs: when a wait hangs, the last line says on what; the
heartbeat says it is still alive and what it waits for.

The engine may call the observer from worker threads (parallel consumer rollouts), so every
method takes one lock.  Nothing here holds or prints a value: steps carry names, and
observations names, counts and states (rotate.core.observation).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rotate.cli.console import Console
from rotate.core.timestamps import rfc3339

if TYPE_CHECKING:
    from rotate.cli.step_table import StepRow
    from rotate.core.observation import Observation
    from rotate.engine.model import PlannedStep, StepRecord

#: how often piped output says that a step still runs
HEARTBEAT_SECONDS = 10.0

Monotonic = Callable[[], float]


def elapsed(seconds: float) -> str:
    """``7s``, ``1m05s``: a running step's age, to the second."""
    whole = int(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m{whole % 60:02d}s"


@dataclass
class _Running:
    """A step between its start and its end, with what its wait saw last."""

    step: PlannedStep
    started: float
    next_beat: float
    seen: Observation | None = field(default=None)


class PlainProgress:
    """Timestamped lines, for logs and pipes; a heartbeat line per running step.

    ``monotonic`` and ``interval`` are injectable so a test drives :meth:`beat` without
    sleeping; :meth:`start_heartbeat` runs it on a daemon thread (``drive`` does), checked
    every ``tick`` seconds and stopped by :meth:`close`."""

    def __init__(self, console: Console, clock: Callable[[], datetime],
                 total: int | None = None, *, monotonic: Monotonic = time.monotonic,
                 interval: float = HEARTBEAT_SECONDS) -> None:
        self._console = console
        self._clock = clock
        self._monotonic = monotonic
        self.interval = interval
        self.total = total
        self._lock = threading.Lock()
        self._running: dict[tuple[int, str], _Running] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _where(self, step: PlannedStep) -> str:
        count = f"{step.index}/{self.total}" if self.total else str(step.index)
        return f"[{count}] {step.kind} {step.target}"

    def _line(self, text: str) -> None:
        self._console.note(f"{rfc3339(self._clock(), micro=False)}  {text}")

    def set_total(self, total: int) -> None:
        """Optional hook: the engine may say how many steps the run has ("[2/14]")."""
        self.total = total

    def step_started(self, step: PlannedStep) -> None:
        now = self._monotonic()
        with self._lock:
            self._running[(step.index, step.target)] = _Running(step, now, now + self.interval)
            self._line(f"{self._where(step)} …")

    def step_observed(self, step: PlannedStep, observation: Observation) -> None:
        with self._lock:
            running = self._running.get((step.index, step.target))
            if running is not None:
                running.seen = observation

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None:
        took = "" if record.seconds is None else f" {record.seconds:.2f}s"
        detail = f" ({record.detail})" if record.status != "done" and record.detail else ""
        with self._lock:
            self._running.pop((step.index, step.target), None)
            self._line(f"{self._where(step)} … {record.status}{took}{detail}")

    def beat(self) -> None:
        """A heartbeat line for each step running for another ``interval`` since its last
        line: elapsed time and last observation."""
        now = self._monotonic()
        with self._lock:
            for running in self._running.values():
                if now < running.next_beat:
                    continue
                while running.next_beat <= now:  # one line, however late the check came
                    running.next_beat += self.interval
                seen = f": {running.seen.short}" if running.seen is not None else ""
                self._line(f"{self._where(running.step)} … running "
                           f"{elapsed(now - running.started)}{seen}")

    def start_heartbeat(self, tick: float = 1.0) -> None:
        """Call :meth:`beat` every ``tick`` seconds on a daemon thread until :meth:`close`."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(tick):
                self.beat()

        self._thread = threading.Thread(target=loop, name="rotate-heartbeat", daemon=True)
        self._thread.start()

    def note(self, text: str) -> None:
        with self._lock:
            self._line(text)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class LiveProgress:
    """A rich Live view of the steps, redrawn a few times a second so a running step's time
    ticks; the engine's notes print above it.  Live's redraw calls :meth:`view`, which takes
    this object's lock: nothing may call into Live while holding it."""

    def __init__(self, console: Console, clock: Callable[[], datetime],
                 total: int | None = None, *, monotonic: Monotonic = time.monotonic) -> None:
        from rich.live import Live

        self._console = console
        self._clock = clock
        self._monotonic = monotonic
        self.total = total
        self._lock = threading.Lock()
        # (index, target) → the row as shown; insertion order is display order.  A running
        # step's row is built at each redraw (its time ticks), from _running.
        self._rows: dict[tuple[int, str], StepRow | None] = {}
        self._running: dict[tuple[int, str], _Running] = {}
        # When the report table follows on the same terminal, the live view makes way for it.
        transient = console.result_is_terminal and not console.json_mode
        self._live = Live(console=console.err, transient=transient, refresh_per_second=4,
                          get_renderable=self.view)
        self._live.start()

    def _index(self, step: PlannedStep) -> str:
        return f"{step.index}/{self.total}" if self.total else str(step.index)

    def rows(self) -> list[StepRow]:
        """The rows as shown now (a running step's time is its age)."""
        from rotate.cli.step_table import StepRow

        now = self._monotonic()
        with self._lock:
            shown = []
            for key, row in self._rows.items():
                running = self._running.get(key)
                if row is None and running is not None:
                    step = running.step
                    row = StepRow(self._index(step), step.stage, step.kind, step.target,
                                  "running", elapsed(now - running.started),
                                  running.seen.short if running.seen is not None else "")
                if row is not None:
                    shown.append(row)
            return shown

    def view(self) -> Any:
        from rotate.cli.step_table import steps_view

        return steps_view(self.rows(), self._console.err.width)

    def set_total(self, total: int) -> None:
        self.total = total

    def step_started(self, step: PlannedStep) -> None:
        now = self._monotonic()
        with self._lock:
            key = (step.index, step.target)
            self._running[key] = _Running(step, now, now)
            self._rows[key] = None

    def step_observed(self, step: PlannedStep, observation: Observation) -> None:
        with self._lock:
            running = self._running.get((step.index, step.target))
            if running is not None:
                running.seen = observation

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None:
        from rotate.cli.step_table import StepRow

        with self._lock:
            key = (step.index, step.target)
            self._running.pop(key, None)
            # a done step's detail waits for the report: the view stays one line per step
            self._rows[key] = StepRow(
                self._index(step), step.stage, step.kind, step.target, record.status,
                "" if record.seconds is None else f"{record.seconds:.2f}s",
                "" if record.status == "done" else record.detail)

    def note(self, text: str) -> None:
        # Not under self._lock: printing redraws the view, and the redraw (view → rows)
        # takes that lock; rich serialises the print itself.
        self._live.console.print(f"{rfc3339(self._clock(), micro=False)}  {text}", markup=False,
                                 highlight=False)

    def close(self) -> None:
        self._live.refresh()
        self._live.stop()


Progress = PlainProgress | LiveProgress


def progress_for(console: Console, clock: Callable[[], datetime],
                 total: int | None = None) -> Progress:
    """Live view when stderr is a terminal, plain lines (with a heartbeat) otherwise."""
    if console.progress_is_terminal:
        return LiveProgress(console, clock, total)
    plain = PlainProgress(console, clock, total)
    plain.start_heartbeat()
    return plain
