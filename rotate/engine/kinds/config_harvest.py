"""④ ``config.harvest``: every consumer's Config Center document resolved (values read from
the cluster and the backend) and validated against its schema, before any is written.

The credential's own Secret key resolves to the value this run put in the backend, not to
what the Secret holds when the harvest reads it: under the restart strategy the harvest runs
while ESO reacts (rotate.engine.plan), when the Secret may still hold the old value.  It is
the same document either way once the sync is proven — sync.wait proves the Secret holds
exactly that value — and preflight validated the documents the same way, with the candidate
in place of the Secret's value."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.chain.model import SecretKeyRef
from rotate.core.errors import RejectedError
from rotate.core.secret import Secret
from rotate.engine.kinds.backend_write import ensure_value
from rotate.engine.kinds.base import Draft, Outcome, PlanInput, Run, StepData, StepIO, StepKind
from rotate.stages import harvest


@dataclass(frozen=True)
class Harvested(StepData):
    documents: tuple[str, ...]  # the services whose documents are valid


def document(run: Run, name: str) -> Mapping[str, Any]:
    """The document harvested for ``name`` (harvested again after a resume: reads only)."""
    doc = run.documents.get(name)
    if doc is None:
        doc = harvest.harvest(run.adapters.kube, run.service(name), new_value(run))
        if not doc.ok:
            raise RejectedError("rotate", "harvest", "; ".join(str(p) for p in doc.problems))
        run.documents[name] = doc
    return doc.value


def new_value(run: Run) -> dict[SecretKeyRef, Secret]:
    """The credential's Secret key → the value this run wrote to the backend (module doc)."""
    return {run.credential.secret: ensure_value(run)}


#: a harvest of more consumers than this names the first ones and the last
NAMED = 5


def names_in_short(names: list[str]) -> str:
    """``cart, order, user`` — or, for more than :data:`NAMED`, ``cart, order, user, …,
    consumer-100 (100)``: the step's target is one cell of the plan, the report and the
    journal, and at 100 consumers the whole list would make every line of the plan 1,500
    characters wide."""
    if len(names) <= NAMED:
        return ", ".join(names)
    return f"{', '.join(names[:NAMED - 2])}, …, {names[-1]} ({len(names)})"


class ConfigHarvest(StepKind[Harvested]):
    name: ClassVar[str] = "config.harvest"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 13
    prepares: ClassVar[bool] = True
    result: ClassVar[type[StepData]] = Harvested
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()  # reads only

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        services = inp.services
        if services:
            yield Draft(names_in_short([s.name for s in services]),
                        f"{len(services)} document(s) resolved and validated against their "
                        "schemas")

    def observe(self, run: Run, io: StepIO) -> Outcome[Harvested] | None:
        return None  # reads only: harvesting again is the observation

    def act(self, run: Run, io: StepIO) -> Outcome[Harvested]:
        reads = harvest.SharedReads(run.adapters.kube)  # each shared source read once
        override = new_value(run)
        for name in run.start.consumers:
            run.documents[name] = harvest.harvest(reads, run.service(name), override)
        return Outcome(Harvested(run.start.consumers), "")

    def prove(self, run: Run, io: StepIO, acted: Outcome[Harvested]) -> Outcome[Harvested]:
        problems = [str(p) for name in acted.data.documents
                    for p in run.documents[name].problems]
        if problems:
            raise RejectedError("rotate", "harvest", "; ".join(problems))
        return Outcome(acted.data, f"{len(acted.data.documents)} document(s) valid")
