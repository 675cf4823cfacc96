"""Frozen data of the engine: what the CLI hands it, what it hands back, what its journal holds.

:class:`Options` (the CLI's choices) and :class:`Adapters` (the systems, built by an
:class:`AdapterFactory`) are what an :class:`~rotate.engine.api.Engine` runs with.

A :class:`Plan` is computed by a pure function from the chain file and what preflight
observed; it holds names, versions and counts — never a secret value — so it can be
printed, serialised to JSON (cli.md "Plan") and compared in golden tests.

A :class:`RunReport` is derived from a run's journal (cli.md "Run report"); the journal is
the source of truth, the report a view of it.
The journal's first record, ``run.start``, is rotate.engine.run_start.RunStart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rotate.chain.model import Chain
from rotate.core.findings import Check, Trap
from rotate.core.observation import Observation
from rotate.core.refs import ObjectRef
from rotate.core.strategy import Strategy
from rotate.engine.member import Member
from rotate.engine.options import Options

if TYPE_CHECKING:  # annotations only: the seams' Protocols cost start-up (bench/startup.py)
    from rotate.clients.provider_seams import ProviderConnector
    from rotate.clients.seams import ConfigCenter, Kube, Metrics, Readyz, Vault

#: re-exported: the CLI and tests import them from here
__all__ = ["Check", "Member", "Options", "Strategy", "Trap"]

StepStatus = Literal["pending", "running", "done", "failed", "skipped"]
RunStatus = Literal[
    "running", "succeeded", "failed", "interrupted", "rolled-back", "rollback-failed"
]
Operation = Literal["rotate", "rollback"]

#: Which form of its kind a planned step is (a step kind class is keyed by kind and phase):
#: ``main`` — the ordinary step; ``restore`` — a rollback putting back what a run replaced;
#: ``retire`` — the overlap strategy's phase 2, where the previous value becomes valid
#: nowhere (same kinds as phase 1 on the same objects, so the phase keeps them apart).
Phase = Literal["main", "restore", "retire"]
PHASES: tuple[Phase, ...] = ("main", "restore", "retire")


@dataclass(frozen=True)
class Adapters:
    """The systems one run drives, behind their seams (rotate.clients.seams)."""

    vault: Vault
    kube: Kube
    config_center: ConfigCenter
    readyz: Readyz
    #: opens admin sessions and login probes on providers (live apply methods, verify)
    providers: ProviderConnector | None = None
    #: PromQL instant queries (a canary's bake with ``query``); None: built on first use
    metrics: Metrics | None = None


class AdapterFactory(Protocol):
    """Builds each adapter on its own, so ``doctor`` can report one that cannot be built
    (a missing variable, say) and still check the others."""

    def vault(self, chain: Chain, environ: Mapping[str, str]) -> Vault: ...

    def kube(self, chain: Chain, options: Options, environ: Mapping[str, str]) -> Kube: ...

    def config_center(self, chain: Chain, environ: Mapping[str, str]) -> ConfigCenter: ...

    def readyz(self, kube: Kube) -> Readyz: ...

    def providers(self) -> ProviderConnector: ...

    def metrics(self) -> Metrics: ...


class ChainLoader(Protocol):
    """Reads and validates a chain file (``rotate.chain.loader.load_chain``)."""

    def __call__(self, path: Path) -> Chain: ...


@dataclass(frozen=True)
class PlannedStep:
    index: int
    stage: int  # 1..4 (0 for preflight)
    kind: str  # cli.md step kinds: the name of its step kind
    target: str
    detail: str = ""
    #: what the executor acts on: a service name for per-consumer steps, a workload
    #: ObjectRef string ("deployment/ns/name") for provider steps, "" otherwise
    subject: str = ""
    phase: Phase = "main"
    #: the credential whose run acts: set only in a run of several credentials
    #: (rotate.engine.merge); "" — the run's one credential
    credential: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "stage": self.stage, "kind": self.kind,
                               "target": self.target, "detail": self.detail,
                               "subject": self.subject}
        if self.phase != "main":  # the plan JSON of a plain rotation stays as it was
            out["phase"] = self.phase
        if self.credential:  # and so does a one-credential run's
            out["credential"] = self.credential
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlannedStep:
        phase = str(data.get("phase", "main"))
        return cls(int(data["index"]), int(data["stage"]), str(data["kind"]),
                   str(data["target"]), str(data.get("detail", "")),
                   str(data.get("subject", "")),
                   phase if phase in PHASES else "main", str(data.get("credential", "")))


@dataclass(frozen=True)
class Adoption:
    """What ``rotate CREDENTIAL --adopt`` found in the backend (rotate.engine.adoption):
    names and versions only, never a value.

    ``version`` is the current version M, which no rotate run wrote (a ``bao kv put`` by
    hand, the backend's own rotation); ``chain_version`` is W, the last version a rotate run
    wrote (the path's ``rotate-version`` custom metadata): the value the provider, the
    Secret and the consumers hold.  ``noop``: M holds W's value, so there is nothing to
    adopt and nothing runs."""

    version: int
    chain_version: int
    noop: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "chain_version": self.chain_version,
                "noop": self.noop, "detail": self.detail}


@dataclass(frozen=True)
class Plan:
    credential: str
    strategy: Strategy
    consumers: tuple[str, ...]
    providers: tuple[str, ...]
    backend_path: str  # "secret/infra/dragonfly#password"
    current_version: int | None
    preflight: tuple[Check, ...]
    traps: tuple[Trap, ...]
    steps: tuple[PlannedStep, ...]
    #: why this strategy when the chain file does not set one (Credential.strategy_reason)
    strategy_reason: str = ""
    #: workloads that read the Secret themselves: ref → how, and what rotate does
    readers: Mapping[str, str] = field(default_factory=dict)
    #: ``--adopt``: the backend's version the run carries through the chain (None: a
    #: rotation with a new value)
    adopt: Adoption | None = None
    #: a run of several credentials: each one's own plan (its steps are in ``steps``)
    members: tuple[Plan, ...] = ()
    #: the strategy is --strategy's, not the chain's: the command to run it must say so too
    strategy_given: bool = False
    #: the consumers in the order they move, wave by wave (the canary first); empty for a
    #: credential without ``waves`` or ``canary`` (every consumer at once)
    waves: tuple[tuple[str, ...], ...] = ()
    #: the canary: ``consumers`` (wave 1), ``bake_seconds``, ``query`` {expr, max} or None
    canary: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok or not c.fatal for c in self.preflight) and not any(
            t.blocking for t in self.traps)

    @property
    def credentials(self) -> tuple[str, ...]:
        return tuple(m.credential for m in self.members) or (self.credential,)

    def to_json(self) -> dict[str, Any]:
        out = self._json()
        if self.adopt is not None:  # only an adopt plan has the field
            out["adopt"] = self.adopt.to_json()
        if self.readers:  # chains without consumers.namespaces keep the JSON they had
            out["workload_consumers"] = [{"workload": ref, "reads": words}
                                         for ref, words in self.readers.items()]
        if self.waves:  # only a plan in waves has them
            out["waves"] = [list(w) for w in self.waves]
        if self.canary is not None:
            out["canary"] = dict(self.canary)
        if self.members:  # a one-credential plan keeps the JSON it had
            out["credentials"] = list(self.credentials)
            out["members"] = [{"credential": m.credential, "strategy": m.strategy,
                               "consumers": list(m.consumers),
                               "providers": list(m.providers),
                               "backend": {"path": m.backend_path,
                                           "current_version": m.current_version}}
                              for m in self.members]
        return out

    def _json(self) -> dict[str, Any]:
        return {
            "kind": "plan",
            "credential": self.credential,
            "strategy": self.strategy,
            "strategy_reason": self.strategy_reason,
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
    operation: Operation = "rotate"

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "credential": self.credential,
                "started_at": self.started_at, "status": self.status,
                "failed_step": self.failed_step, "operation": self.operation}


class Observer(Protocol):
    """Progress sink the CLI implements (live view on a TTY, timestamped lines otherwise)."""

    def set_total(self, total: int) -> None:
        """How many steps the plan has (progress shows ``[i/total]``)."""

    def step_started(self, step: PlannedStep) -> None: ...

    def step_observed(self, step: PlannedStep, observation: Observation) -> None:
        """What the running ``step``'s wait saw last (``2/3 pods ready``), each time it
        changes; may come from the step's worker thread (rotate.core.observation)."""

    def step_finished(self, step: PlannedStep, record: StepRecord) -> None: ...

    def note(self, text: str) -> None: ...


@dataclass(frozen=True)
class PreflightResult:
    """What preflight observed, as plain values: the input of the pure plan builder.

    One value from preflight to the steps: the plan's kinds read it as ``PlanInput.observed``
    and a fresh run's steps as ``Run.observed`` (rotate.engine.kinds.base), nothing copies
    its fields.  The empty one (every field at its default) is "nothing observed": a resumed
    run's, which may come hours later and reads anew."""

    checks: tuple[Check, ...] = ()
    traps: tuple[Trap, ...] = ()
    current_version: int | None = None  # Vault current version (0: path never written)
    consumers: tuple[str, ...] = ()
    config_versions: dict[str, int | None] = field(default_factory=dict)  # service → version
    token_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)  # service → live ids
    reloader: dict[str, str] = field(default_factory=dict)  # provider ref → which reloader
    ondelete: tuple[str, ...] = ()  # workload refs with updateStrategy OnDelete
    #: consumer workload ref → why its rollout waits for stage ③ (old pods would go first)
    no_surge: dict[str, str] = field(default_factory=dict)
    #: consumer workload ref → what preparing its rollout early costs (capacity)
    thinned: dict[str, str] = field(default_factory=dict)
    #: consumer workload refs prepared early whose pod template has no startupProbe
    unprobed: tuple[str, ...] = ()
    #: uid of each object preflight read (workloads, the ExternalSecret): the run's events
    #: name them without reading them again
    uids: dict[ObjectRef, str] = field(default_factory=dict)
    #: workloads that read a target Secret themselves (consumers.namespaces): workload ref
    #: → how it reads it and what rotate does (rotate.stages.secret_readers.Reader.words)
    readers: dict[str, str] = field(default_factory=dict)
    #: the readers rotate restarts (``workload.restart``), in discovery order
    reader_restarts: tuple[str, ...] = ()
    #: further ExternalSecrets of the credential's backend path and key ("ns/name"), each
    #: forced and proven by its own ``sync.trigger``/``sync.wait``
    external_secrets: tuple[str, ...] = ()

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
    strategy: Strategy
    last_run: RunSummary | None

    def to_json(self) -> dict[str, Any]:
        last = None
        if self.last_run is not None:
            last = {"run_id": self.last_run.run_id, "status": self.last_run.status,
                    "started_at": self.last_run.started_at}
        return {"name": self.name, "description": self.description,
                "providers": list(self.providers), "consumers": list(self.consumers),
                "strategy": self.strategy, "last_run": last}
