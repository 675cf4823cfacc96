"""Frozen data the engine hands to the CLI: plans, checks, run reports.

A :class:`Plan` is computed by a pure function from the chain file and what preflight
observed; it holds names, versions and counts — never a secret value — so it can be
printed, serialised to JSON (cli.md "Plan") and compared in golden tests.

A :class:`RunReport` is derived from a run's journal (cli.md "Run report"); the journal is
the source of truth, the report a view of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rotate.core.findings import Check, Trap

__all__ = ["Check", "Trap"]  # re-exported: the CLI and tests import them from here

StepStatus = Literal["pending", "running", "done", "failed", "skipped"]
RunStatus = Literal[
    "running", "succeeded", "failed", "interrupted", "rolled-back", "rollback-failed"
]

STAGE_NAMES = {0: "preflight", 1: "backend", 2: "sync", 3: "provider", 4: "consumers"}


@dataclass(frozen=True)
class PlannedStep:
    index: int
    stage: int  # 1..4 (0 for preflight)
    kind: str  # cli.md step kinds
    target: str
    detail: str = ""
    #: what the executor acts on: a service name for per-consumer steps, a workload
    #: ObjectRef string ("deployment/ns/name") for provider steps, "" otherwise
    subject: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "stage": self.stage, "kind": self.kind,
                "target": self.target, "detail": self.detail, "subject": self.subject}


@dataclass(frozen=True)
class Plan:
    credential: str
    strategy: str
    consumers: tuple[str, ...]
    providers: tuple[str, ...]
    backend_path: str  # "secret/infra/dragonfly#password"
    current_version: int | None
    preflight: tuple[Check, ...]
    traps: tuple[Trap, ...]
    steps: tuple[PlannedStep, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok or not c.fatal for c in self.preflight) and not any(
            t.blocking for t in self.traps)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "plan",
            "credential": self.credential,
            "strategy": self.strategy,
            "consumers": list(self.consumers),
            "providers": list(self.providers),
            "backend": {"path": self.backend_path, "current_version": self.current_version},
            "ok": self.ok,
            "preflight": [c.to_json() for c in self.preflight],
            "traps": [t.to_json() for t in self.traps],
            "steps": [s.to_json() for s in self.steps],
        }


@dataclass(frozen=True)
class StepRecord:
    index: int
    stage: int
    kind: str
    target: str
    status: StepStatus
    started_at: str | None = None  # RFC3339
    finished_at: str | None = None
    seconds: float | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "stage": self.stage, "kind": self.kind,
                "target": self.target, "status": self.status, "started_at": self.started_at,
                "finished_at": self.finished_at, "seconds": self.seconds, "detail": self.detail}


@dataclass(frozen=True)
class RunReport:
    run_id: str
    credential: str
    status: RunStatus
    exit_code: int
    started_at: str
    finished_at: str | None
    backend: dict[str, Any]  # {"path", "previous_version", "version"}
    steps: tuple[StepRecord, ...]
    message: str = ""  # the one-paragraph explanation on failure
    resume: str = ""
    rollback: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "run", "run_id": self.run_id, "credential": self.credential,
                "status": self.status, "exit_code": self.exit_code,
                "started_at": self.started_at, "finished_at": self.finished_at,
                "backend": self.backend, "steps": [s.to_json() for s in self.steps],
                "message": self.message, "resume": self.resume, "rollback": self.rollback,
                **self.extra}


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    credential: str
    started_at: str
    status: RunStatus
    failed_step: str | None
    operation: str = "rotate"  # "rotate" | "rollback"

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "credential": self.credential,
                "started_at": self.started_at, "status": self.status,
                "failed_step": self.failed_step, "operation": self.operation}


class Observer(Protocol):
    """Progress sink the CLI implements (live view on a TTY, timestamped lines otherwise)."""

    def set_total(self, total: int) -> None:
        """How many steps the plan has (progress shows ``[i/total]``)."""

    def step_started(self, step: PlannedStep) -> None: ...

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None: ...

    def note(self, text: str) -> None: ...


class NullObserver:
    def set_total(self, total: int) -> None:
        pass

    def step_started(self, step: PlannedStep) -> None:
        pass

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None:
        pass

    def note(self, text: str) -> None:
        pass


def steps_json(steps: Sequence[PlannedStep]) -> list[dict[str, Any]]:
    return [s.to_json() for s in steps]


@dataclass(frozen=True)
class PreflightResult:
    """What preflight observed, as plain values: the input of the pure plan builder."""

    checks: tuple[Check, ...]
    traps: tuple[Trap, ...]
    current_version: int | None  # Vault current version (0: path never written)
    consumers: tuple[str, ...]
    config_versions: dict[str, int | None] = field(default_factory=dict)  # service → version
    token_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)  # service → live ids
    reloader: dict[str, str] = field(default_factory=dict)  # provider ref → which reloader
    ondelete: tuple[str, ...] = ()  # workload refs with updateStrategy OnDelete

    @property
    def ok(self) -> bool:
        return all(c.ok or not c.fatal for c in self.checks) and not any(
            t.blocking for t in self.traps)


@dataclass(frozen=True)
class CredentialSummary:
    name: str
    description: str
    providers: tuple[str, ...]
    consumers: tuple[str, ...]
    strategy: str
    last_run: RunSummary | None

    def to_json(self) -> dict[str, Any]:
        last = None
        if self.last_run is not None:
            last = {"run_id": self.last_run.run_id, "status": self.last_run.status,
                    "started_at": self.last_run.started_at}
        return {"name": self.name, "description": self.description,
                "providers": list(self.providers), "consumers": list(self.consumers),
                "strategy": self.strategy, "last_run": last}
