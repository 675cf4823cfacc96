"""Driving a real Engine over a World of fakes (tests.fakes): an observer that records each
step, Options rooted in a test's tmp_path, run/resume/rollback, and the journal's lines.
The ``world`` fixture itself is in tests/unit/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rotate.core.observation import Observation
from rotate.core.waiting import CancelToken
from rotate.engine.model import Options, PlannedStep, RunReport, StepRecord
from tests.fakes import World


class RecordingObserver:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.on_start: dict[str, Any] = {}
        self.on_finish: dict[str, Any] = {}
        #: (step kind, observation) in the order the waits reported them
        self.observed: list[tuple[str, Observation]] = []
        self.on_observe: dict[str, Any] = {}

    def set_total(self, total: int) -> None:
        self.total = total

    def step_started(self, step: PlannedStep) -> None:
        self.events.append(("start", step.kind, step.target))
        hook = self.on_start.get(step.kind)
        if hook is not None:
            hook(step)

    def step_observed(self, step: PlannedStep, observation: Observation) -> None:
        self.observed.append((step.kind, observation))
        hook = self.on_observe.get(step.kind)
        if hook is not None:
            hook(step, observation)

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None:
        self.events.append((record.status, step.kind, step.target))
        hook = self.on_finish.get(step.kind)
        if hook is not None:
            hook(step, record)

    def note(self, text: str) -> None:
        self.events.append(("note", text, ""))


def options(tmp_path: Path, **kw: Any) -> Options:
    return Options(chain_file=tmp_path / "rotate.yaml", state_dir=tmp_path / "state", **kw)


def journal_lines(tmp_path: Path, run_id: str) -> list[dict[str, Any]]:
    path = tmp_path / "state" / "runs" / run_id / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def run(world: World, tmp_path: Path, observer: RecordingObserver | None = None,
        cancel: CancelToken | None = None, **kw: Any) -> RunReport:
    return world.engine().run(options(tmp_path, **kw), "dragonfly",
                              observer or RecordingObserver(), cancel or CancelToken())


def resume(world: World, tmp_path: Path, run_id: str) -> RunReport:
    return world.engine().resume(options(tmp_path), run_id, RecordingObserver(), CancelToken())


def rollback(world: World, tmp_path: Path, run_id: str) -> RunReport:
    return world.engine().rollback(options(tmp_path), run_id, RecordingObserver(),
                                   CancelToken())
