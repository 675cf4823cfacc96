"""① ``backend.retire`` (overlap phase 2): the previous key gets the new value too, so the old
value is valid nowhere (see stages.backend.retire)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from rotate.core.errors import StepFailed
from rotate.core.refs import ObjectRef
from rotate.engine.kinds import objects
from rotate.engine.kinds.backend_write import BackendWritten, written_version
from rotate.engine.kinds.base import (
    ITSELF,
    Draft,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
    Told,
)
from rotate.engine.targets import backend_target
from rotate.stages import backend


class BackendRetire(StepKind[BackendWritten]):
    name: ClassVar[str] = "backend.retire"
    stage: ClassVar[int] = 1
    exit_code: ClassVar[int] = 10
    result: ClassVar[type[StepData]] = BackendWritten
    #: rolling back an overlap run is an overlap itself: it retires the value it replaced
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    event_reason: ClassVar[str | None] = "PreviousValueRetired"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.BACKEND_RETIRED,)}
    writes_backend: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.external_secret(run)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if not inp.previous_key_overlap:
            return
        prev = inp.credential.overlap.previous_key if inp.credential.overlap else "?"
        yield Draft(backend_target(inp.chain, inp.credential),
                    f"new version where {prev} := {inp.credential.secret.key} "
                    "(the previous value is valid nowhere)")

    def _wrote(self, run: Run) -> int:
        wrote = written_version(run)
        if wrote is None:
            raise StepFailed("backend.retire runs after backend.write, which is not done")
        return wrote

    def observe(self, run: Run, io: StepIO) -> Outcome[BackendWritten] | None:
        if "retire_from" not in io.prior:
            return None
        version = backend.observe(run.adapters.vault, run.path, run.run_id,
                                  int(io.prior["retire_from"]))
        if version is None:
            return None
        return Outcome(BackendWritten(self._wrote(run), version),
                       f"v{version} was already written by this run; not written again")

    def act(self, run: Run, io: StepIO) -> Outcome[BackendWritten]:
        prev_key = run.overlap_key
        if prev_key is None:
            raise StepFailed("this run does not use the overlap strategy")
        wrote = self._wrote(run)
        io.record(retire_from=wrote)
        w = backend.retire(run.adapters.vault, run.path, run.credential.backend.key, prev_key,
                           run.run_id, expected_version=wrote)
        return Outcome(BackendWritten(w.previous_version, w.version),
                       f"v{w.previous_version} → v{w.version}: {prev_key} no longer holds "
                       "the old value")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[BackendWritten]) -> Outcome[BackendWritten]:
        return acted
