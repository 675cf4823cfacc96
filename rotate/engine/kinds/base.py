"""What a step kind is: one class per kind, declaring everything the engine needs of it.

Modelled on Django migrations' ``Operation``: a class holds the description, the forward
action and how it is undone.  A kind declares

* ``name``, ``phase`` — the kind's string in the plan, the journal and the CLI
  (``backend.write``), and which form of it this class is (:data:`~rotate.engine.model.Phase`);
* ``stage`` (①..④ of the chain) and ``exit_code`` (cli.md: the run's code when it fails);
* ``parallel`` — consecutive steps of the kind may run at once (``--max-parallel``);
  ``lane`` — consecutive parallel steps of kinds that share a lane run per consumer: each
  consumer's steps in plan order, up to ``--max-parallel`` consumers at once
  (rotate.engine.executor);
* :meth:`StepKind.plan` — its steps in a plan, from pure values (:class:`PlanInput`);
* :meth:`StepKind.observe`, :meth:`StepKind.act`, :meth:`StepKind.prove` — what an earlier
  attempt already did, the change, and the proof that it holds;
* ``result`` — the typed data its ``step.done`` record holds (:class:`StepData`), which later
  steps read back through :meth:`Run.result`;
* ``undo`` — the kinds a rollback runs to undo it (``()``: nothing to undo; :data:`ITSELF`:
  the kind again; :func:`later` names kinds defined after it);
* ``prepares`` — under the ``restart`` strategy its steps run *before* stage ③, while ESO
  reacts (a consumer made ready for the new value while the provider still holds the old
  one), unless a draft says ``late``; ``compensate`` — the kind that undoes such a prepared
  step within the run when a step it was prepared ahead of fails (rotate.engine.undo);
* ``one_per_consumer`` — its steps act on a consumer itself: a run of several credentials
  plans them once per consumer (rotate.engine.merge);
* what generic code asks of a kind instead of knowing it by name: ``event_reason`` and
  :meth:`StepKind.objects` (its Kubernetes Events, rotate.engine.events), ``tells`` (what its
  journaled steps say of the chain's state now, rotate.engine.chain_state), ``writes_value``,
  ``writes_backend``, ``writes_document`` (what rollback, resume, the report and the
  unfinished-run check read from its journaled data), ``undoes_prepared`` (whether
  its failure undoes what was prepared ahead of it), ``undone_words`` (a compensation's
  words in a failure message) and ``legacy_rollback_form`` (how old journals spell it).

Invariant, shared by every kind: a step is idempotent with respect to the journal.
``io.prior`` holds what earlier attempts recorded (``io.record`` journals a fact *before* the
action that needs it), and ``observe`` looks at it and at the world before anything is done
again.  No kind returns or records a secret value.
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar, cast

from rotate.chain.model import Chain, Credential, Service
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.core.waiting import CancelToken, Deadline
from rotate.engine.kinds.declarations import BEGUN_UNFINISHED as BEGUN_UNFINISHED
from rotate.engine.kinds.declarations import ITSELF as ITSELF
from rotate.engine.kinds.declarations import PLANNED as PLANNED
from rotate.engine.kinds.declarations import Told as Told
from rotate.engine.kinds.declarations import later as later
from rotate.engine.model import Adapters, Adoption, Phase, PlannedStep, PreflightResult
from rotate.engine.run_start import RunStart
from rotate.stages.harvest import Document
from rotate.stages.kubecache import KubeCaches

D = TypeVar("D", bound="StepData")


class Recorder(Protocol):
    """What a run's steps journal through (rotate.engine.journal.Journal).  The kinds never
    read a journal file, so they do not import the journal module: it is the journal that
    asks the kinds how to read old journals (rotate.engine.kinds.read_untyped_rollback)."""

    #: the journal file (the executor reads the run's state back from it)
    path: Path

    def append(self, event: str, *, step: PlannedStep | None = None,
               data: Mapping[str, Any] | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class StepData:
    """Base of every kind's typed result; JSON in the journal, typed between steps.

    ``from_json`` reads only the fields the class has (a journaled step's data also holds
    its progress facts, detail and timing) and turns JSON lists back into tuples.  A field
    whose metadata says ``omit_none`` is left out of the JSON while it is None.
    """

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omit_none"):
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_json(cls: type[D], data: Mapping[str, Any]) -> D:
        hints = _hints(cls)
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if typing.get_origin(hints[f.name]) is tuple and value is not None:
                value = tuple(value)
            kwargs[f.name] = value
        return cls(**kwargs)


_HINTS: dict[type[StepData], dict[str, Any]] = {}


def _hints(cls: type[StepData]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def omit_none() -> Any:
    """A field that defaults to None and is absent from the JSON while None."""
    return field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True)
class NoData(StepData):
    """The result of a kind whose proof leaves nothing for later steps."""


@dataclass(frozen=True)
class Outcome(Generic[D]):
    data: D
    detail: str  # one line for the report, never a value


class Draft(NamedTuple):
    """One step as a kind describes it; the plan builder numbers it."""

    target: str
    detail: str
    subject: str = ""
    #: a step of a ``prepares`` kind that must still wait for stage ③ (its workload would
    #: lose its serving pods before the new ones can become Ready)
    late: bool = False


@dataclass(frozen=True)
class Restore:
    """What a rollback puts back, from the original run's journal."""

    backend_version: int  # the version N the run replaced
    config_versions: Mapping[str, int]  # service → version its document had before the run
    of_overlap: bool  # the run used the overlap strategy
    #: service → If-Match of its restore: the version the run wrote (absent: the current
    #: one, only when ``--force`` overrode a document that moved since the run)
    config_match: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanInput:
    """Everything a kind may use to describe its steps: plain values, no I/O.

    ``observed`` is preflight's result as it came (versions, tokens, the workloads' traits:
    reloader, OnDelete, no surge, thinned, unprobed); a rollback's holds only the consumers
    and the backend version the run it undoes wrote from."""

    chain: Chain
    credential: Credential
    strategy: Strategy
    observed: PreflightResult = field(default_factory=PreflightResult)
    restore: Restore | None = None  # a rollback's
    #: ``--adopt``: the backend's current version is carried instead of a new value written
    adopt: Adoption | None = None

    @property
    def consumers(self) -> tuple[str, ...]:
        return self.observed.consumers

    @property
    def wave_members(self) -> tuple[str, ...]:
        """Every consumer a wave may hold: the services, then the Secret's readers."""
        return (*self.consumers, *self.observed.reader_restarts)

    @property
    def services(self) -> list[Service]:
        return [self.chain.services[name] for name in self.consumers]

    @property
    def overlap(self) -> bool:
        return self.strategy == Strategy.overlap

    @property
    def previous_key_overlap(self) -> bool:
        """Overlap through ``overlap.previousKey`` (the backend, the Secret and rollout
        providers carry the previous value); a live method's overlap needs none."""
        return self.overlap and self.credential.overlap is not None

    @property
    def prepare_first(self) -> bool:
        """Consumers are prepared before stage ③: a rotation (not a rollback) with the
        restart strategy (overlap moves consumers only once the provider takes both values)."""
        return not self.overlap and self.restore is None


@dataclass
class Run:
    """Everything a run's steps share.  ``value`` lives only here, in memory."""

    chain: Chain
    credential: Credential
    adapters: Adapters
    journal: Recorder
    cancel: CancelToken
    timeout: float
    max_parallel: int
    start: RunStart
    new_value: Secret | None = None  # --value-stdin; generated otherwise
    #: the environment (a provider's ``addressEnv``)
    environ: Mapping[str, str] = field(default_factory=dict)
    value: Secret | None = None
    documents: dict[str, Document] = field(default_factory=dict)
    #: typed results of the steps done so far: (kind, phase, subject) → data
    results: dict[tuple[str, Phase, str], StepData] = field(default_factory=dict)
    #: what preflight read moments before a fresh run's first step (empty for a resumed
    #: run, which may come hours later: its steps find their earlier records, or read anew).
    #: A step's first attempt records the document versions and live token ids it holds
    #: (``io.record``) instead of reading them again: one round trip less per consumer, and
    #: a document write sends exactly the ``If-Match`` its plan line shows, so a write made
    #: by someone else since preflight is refused (412), never overwritten.
    observed: PreflightResult = field(default_factory=PreflightResult)
    #: watched copies of objects every waiter of the run reads (made on first use);
    #: :meth:`close` ends them when the run ends
    caches: KubeCaches = field(init=False)

    def __post_init__(self) -> None:
        self.caches = KubeCaches(self.adapters.kube)

    def close(self) -> None:
        self.caches.close()

    @property
    def run_id(self) -> str:
        return self.start.run_id

    def deadline(self) -> Deadline:
        return Deadline.after(self.timeout)

    def service(self, name: str) -> Service:
        return self.chain.services[name]

    @property
    def path(self) -> str:
        return self.credential.backend.path

    @property
    def overlap_key(self) -> str | None:
        """The previous key when this run uses the overlap strategy, else None."""
        if self.start.strategy == Strategy.overlap and self.credential.overlap is not None:
            return self.credential.overlap.previous_key
        return None

    def result(self, kind: type[StepKind[D]], subject: str = "") -> D | None:
        """What a done step of ``kind`` on ``subject`` proved, or None when not done."""
        data = self.results.get((kind.name, kind.phase, subject))
        return cast(D, data) if isinstance(data, kind.result) else None

    def remember(self, step: PlannedStep, data: StepData) -> None:
        self.results[(step.kind, step.phase, step.subject)] = data


@dataclass
class StepIO:
    """One step's attempt: the step, and what earlier attempts of it recorded."""

    step: PlannedStep
    journal: Recorder
    prior: dict[str, Any]  # progress facts recorded by earlier attempts (resume)

    def record(self, **data: Any) -> None:
        """Journal facts needed to redo/undo the step before acting on them."""
        self.journal.append("step.progress", step=self.step, data=data)
        self.prior.update(data)


class StepKind(ABC, Generic[D]):
    """One kind of step.  Subclasses set every ClassVar and implement every method."""

    name: ClassVar[str]
    phase: ClassVar[Phase] = "main"
    stage: ClassVar[int]
    exit_code: ClassVar[int]
    parallel: ClassVar[bool] = False
    #: consecutive parallel steps of kinds with the same lane form one group, run per
    #: subject (each consumer's steps in plan order; None: a group holds one kind only)
    lane: ClassVar[str | None] = None
    result: ClassVar[type[StepData]]
    undo: ClassVar[tuple[type[StepKind[Any]], ...]]
    #: under the restart strategy its steps (but a draft's ``late`` ones) run before stage ③,
    #: beside the ``syncs`` step: they need the new value only from the backend, never from
    #: the cluster or the provider (rotate.engine.plan)
    prepares: ClassVar[bool] = False
    #: the step that waits for ESO's sync (the prepared steps run beside it)
    syncs: ClassVar[bool] = False
    #: under the restart strategy its steps (but a draft's ``late`` ones) run right *after*
    #: the ``syncs`` step, before stage ③: its pods read the Secret itself, so they may
    #: start only once the Secret is proven to hold the new value (rotate.engine.plan)
    prepares_after_sync: ClassVar[bool] = False
    #: its steps restart a workload that reads the Secret itself (subject: the workload's
    #: ref); a rollback restarts the same workloads again (rotate.engine.rollback)
    restarts_reader: ClassVar[bool] = False
    #: its steps with a subject act on a further ExternalSecret of the credential's path
    #: (subject ``ns/name``; "" is the chain's own); a rollback syncs the same ones again
    syncs_external_secret: ClassVar[bool] = False
    #: undoes a prepared step of this kind when the stage it ran ahead of fails (None: the
    #: step leaves nothing a consumer would read before the provider switches)
    compensate: ClassVar[type[StepKind[Any]] | None] = None
    #: a *failed* prepared step of this kind is compensated too when its journal holds this
    #: progress fact (None: only done steps are) — it may have changed the world first
    compensate_failed: ClassVar[str | None] = None
    #: when a resume starts at a step of this kind, the steps of this kind run first again
    #: (a sync wait needs a trigger ESO has not answered yet)
    resume_after: ClassVar[str | None] = None
    #: a rollback runs this (undo) kind after every other one, once the consumers are back
    #: on the restored value (e.g. the replaced value removed from a live provider)
    rollback_last: ClassVar[bool] = False
    #: when a step of this kind fails, what was prepared ahead of it is undone
    #: (rotate.engine.undo); False for a final proof whose failure leaves every link the run
    #: changed on the run's value, where undoing the consumers would split them
    undoes_prepared: ClassVar[bool] = True
    #: its steps act on a consumer itself (its tokens, its rollout, its readiness), not on a
    #: credential's values: a run of several credentials plans one per consumer, for the
    #: first of its credentials that consumes it (rotate.engine.merge), so a consumer of
    #: two credentials restarts once
    one_per_consumer: ClassVar[bool] = False
    #: its steps act on one consumer each (subject: its name or workload ref) and move with
    #: that consumer's wave (rotate.chain.waves, rotate.engine.plan)
    per_wave: ClassVar[bool] = False
    #: its step divides the waves: the consumers planned before it are the canary
    #: (rotate.engine.kinds.canary_bake)
    divides_waves: ClassVar[bool] = False
    #: the reason of the Normal event a done step leaves on each of its :meth:`objects`
    #: (None: the step only proves, and its proof is what the object's success event says;
    #: a failed step of any kind leaves a Warning)
    event_reason: ClassVar[str | None] = None
    #: what a journaled step tells of the chain's state now, by its journal status
    #: (:data:`PLANNED`: whatever its status)
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {}
    #: its step puts the run's value in the backend: nothing a rotation does before it
    #: changes anything, a resume re-reads the value from the backend once it is done, and
    #: its data holds the versions the report shows and a rollback restores from
    writes_value: ClassVar[bool] = False
    #: its done step's data holds a backend ``version`` this run wrote
    writes_backend: ClassVar[bool] = False
    #: its done step's data holds a Config Center document ``version`` this run wrote (and
    #: ``previous_version``, the one before it)
    writes_document: ClassVar[bool] = False
    #: a compensation's words for what its done steps put back, ``{}`` the subjects
    undone_words: ClassVar[str | None] = None
    #: a rollback journaled before phases were typed spelled this restore form with the
    #: rotation's phase ``main``; such journals are read with it (read_untyped_rollback)
    legacy_rollback_form: ClassVar[bool] = False

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        """The Kubernetes objects a step on ``subject`` acts on: its events go there
        (none: a step that acts on nothing in the cluster and tells no object of it)."""
        return []

    @classmethod
    @abstractmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        """This kind's steps in a plan (none when it has nothing to do)."""

    @abstractmethod
    def observe(self, run: Run, io: StepIO) -> Outcome[D] | None:
        """The outcome when an earlier attempt already did the work, else None."""

    @abstractmethod
    def act(self, run: Run, io: StepIO) -> Outcome[D]:
        """Make the change (record first what redoing or undoing it needs)."""

    @abstractmethod
    def prove(self, run: Run, io: StepIO, acted: Outcome[D]) -> Outcome[D]:
        """Wait until the change is proven; the step's outcome."""

    def execute(self, run: Run, io: StepIO) -> Outcome[D]:
        """Observe, else act and prove: one attempt of the step."""
        done = self.observe(run, io)
        if done is not None:
            return done
        return self.prove(run, io, self.act(run, io))
