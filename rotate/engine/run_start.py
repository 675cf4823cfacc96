"""The ``run.start`` record: what a run set out to do, typed — the first record of every
journal, and what resume and rollback read back.

Invariants: :meth:`RunStart.to_json` writes the JSON shape journals always had (a
one-credential run keeps the record it had before runs of several), and
:meth:`RunStart.from_json` reads every shape ever journaled, so a run journaled by an older
``rotate`` stays resumable and rollback-able.  It holds names, versions and a salted
fingerprint at most — never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rotate.core.strategy import Strategy
from rotate.engine.member import Member
from rotate.engine.model import Operation, PlannedStep


@dataclass(frozen=True)
class RunStart:
    """The ``run.start`` record: what a run set out to do, typed.  Resume and rollback read
    it back through :meth:`from_json`; the journal keeps the JSON shape it always had."""

    run_id: str
    credential: str
    operation: Operation
    strategy: Strategy
    chain_file: str
    backend_path: str  # "secret/infra/dragonfly" (no key)
    current_version: int | None  # the backend's version before the run (None: unknown)
    consumers: tuple[str, ...]
    providers: tuple[str, ...]
    steps: tuple[PlannedStep, ...]
    holder: str = ""
    of_run: str | None = None  # a rollback: the run it undoes
    restore_backend_version: int | None = None  # a rollback: version N it puts back
    restore_config: Mapping[str, int] = field(default_factory=dict)  # service → version
    #: a rollback: service → the If-Match of its restore (the version the run wrote)
    restore_config_match: Mapping[str, int] = field(default_factory=dict)
    #: a run given --value-stdin: the value's salted fingerprint (core.fingerprint), never
    #: the value; its resume must be given the same value again
    value_fingerprint: Mapping[str, str] | None = None
    #: ``--adopt``: the backend version the run carries (M), and the one the chain held
    #: before it (W); None for a rotation that writes a new value
    adopted: int | None = None
    adopted_from: int | None = None
    #: a run of several credentials: each one (``credential`` joins their names with "+")
    members: tuple[Member, ...] = ()

    @property
    def credentials(self) -> tuple[str, ...]:
        """The run's credentials: its members', or its one."""
        return tuple(m.credential for m in self.members) or (self.credential,)

    def member(self, name: str) -> RunStart:
        """What member ``name``'s steps see as their run's start: its own credential, backend
        and consumers, the run's id, operation, strategy and every step (``prepared`` asks
        whether *any* provider switches after a step)."""
        m = next(x for x in self.members if x.credential == name)
        return replace(self, credential=name, strategy=m.strategy, backend_path=m.backend_path,
                       current_version=m.current_version, consumers=m.consumers,
                       providers=m.providers, restore_backend_version=m.restore_backend_version,
                       restore_config=m.restore_config,
                       restore_config_match=m.restore_config_match, members=())

    def prepared(self, step: PlannedStep) -> bool:
        """``step`` runs ahead of the provider switch (rotate.engine.plan): a stage-④ step of
        a rotation with the restart strategy whose plan has a stage-③ step of the same phase
        after it (in a run of several credentials, any credential's)."""
        strategy = next((m.strategy for m in self.members if m.credential == step.credential),
                        self.strategy)  # a run of several: the step's credential's
        if self.operation != "rotate" or strategy != Strategy.restart or step.stage <= 3:
            return False
        return any(s.index > step.index and s.stage == 3 and s.phase == step.phase
                   for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id, "credential": self.credential, "operation": self.operation,
            "strategy": str(self.strategy), "chain_file": self.chain_file,
            "backend_path": self.backend_path, "current_version": self.current_version,
            "consumers": list(self.consumers), "providers": list(self.providers),
            "steps": [s.to_json() for s in self.steps], "holder": self.holder}
        if self.value_fingerprint is not None:
            out["value_fingerprint"] = dict(self.value_fingerprint)
        if self.adopted is not None:
            out["adopt"] = {"version": self.adopted, "chain_version": self.adopted_from}
        if self.operation == "rollback":
            out.update(of_run=self.of_run, restore_backend_version=self.restore_backend_version,
                       restore_config=dict(self.restore_config),
                       restore_config_match=dict(self.restore_config_match))
        if self.members:  # a one-credential run keeps the record it had
            out["members"] = [m.to_json() for m in self.members]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunStart:
        operation: Operation = "rollback" if data.get("operation") == "rollback" else "rotate"
        strategy = str(data.get("strategy") or "restart")
        current = data.get("current_version")
        restore = data.get("restore_backend_version")
        found = data.get("adopt")
        adopt: Mapping[str, Any] = found if isinstance(found, dict) else {}
        return cls(
            run_id=str(data.get("run_id", "")), credential=str(data.get("credential", "")),
            operation=operation,
            strategy=Strategy(strategy) if strategy in set(Strategy) else Strategy.restart,
            chain_file=str(data.get("chain_file", "")),
            backend_path=str(data.get("backend_path", "")),
            current_version=int(current) if current is not None else None,
            consumers=tuple(str(c) for c in data.get("consumers", [])),
            providers=tuple(str(p) for p in data.get("providers", [])),
            steps=tuple(_legacy_phase(PlannedStep.from_json(s))
                        for s in data.get("steps", [])),
            holder=str(data.get("holder", "")),
            of_run=str(data["of_run"]) if data.get("of_run") else None,
            restore_backend_version=int(restore) if restore is not None else None,
            restore_config={str(k): int(v)
                            for k, v in (data.get("restore_config") or {}).items()},
            value_fingerprint={str(k): str(v) for k, v in data["value_fingerprint"].items()}
            if isinstance(data.get("value_fingerprint"), dict) else None,
            restore_config_match={str(k): int(v) for k, v in
                                  (data.get("restore_config_match") or {}).items()},
            adopted=int(adopt["version"]) if adopt.get("version") is not None else None,
            adopted_from=int(adopt["chain_version"])
            if adopt.get("chain_version") is not None else None,
            members=tuple(Member.from_json(m) for m in data.get("members") or []),
        )


#: Before phases were typed, journals spelled them in the step itself: a ``retire:`` subject
#: prefix, and a rollback's restoring kinds by its operation.  Runs journaled then are still
#: resumable and rollback-able, so their steps are read into the typed form once: the
#: prefix here; a rollback's restore forms by the journal, which asks the kinds which forms
#: they are (rotate.engine.kinds.read_untyped_rollback) — this module knows no kind.
def _legacy_phase(step: PlannedStep) -> PlannedStep:
    if step.phase != "main":
        return step
    if step.subject == "retire" or step.subject.startswith("retire:"):
        return replace(step, subject=step.subject.partition(":")[2], phase="retire")
    return step


def phases_untyped(data: Mapping[str, Any]) -> bool:
    """Whether a ``run.start`` record with steps was journaled before phases were typed: none
    of them names a phase (a rollback's always does since: its backend write is ``restore``)."""
    steps = data.get("steps") or []
    return bool(steps) and not any("phase" in s for s in steps)
