"""④ ``config.undo``: a prepared ``config.write`` taken back within the run.

Never planned: the executor adds it when the stage a document was written ahead of fails
(rotate.engine.undo).  It restores the version the document had before the run as a new
version, If-Match the version *this run wrote* — a document someone changed since is left
alone and the step fails, naming it.  ``io.prior["undoes"]`` holds the journaled data of the
``config.write`` step it undoes (``previous_version``, ``version``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rotate.core.errors import StepFailed
from rotate.engine.kinds.base import Draft, Outcome, PlanInput, Run, StepData, StepIO, StepKind
from rotate.engine.kinds.config_write import ConfigWritten


def _written(io: StepIO) -> tuple[int | None, int]:
    undoes = io.prior.get("undoes") or {}
    if "version" not in undoes:
        raise StepFailed(f"the journal holds no version written by step {io.step.target}; "
                         "nothing to undo from")
    prev = undoes.get("previous_version")
    return (int(prev) if prev is not None else None), int(undoes["version"])


class ConfigUndo(StepKind[ConfigWritten]):
    name: ClassVar[str] = "config.undo"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 13
    result: ClassVar[type[StepData]] = ConfigWritten
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        return ()  # added by the executor, never planned

    def observe(self, run: Run, io: StepIO) -> Outcome[ConfigWritten] | None:
        if "cas" not in io.prior:
            return None
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        prev, written = _written(io)
        current = cc.get_version_number(svc.name, svc.config_key)
        if prev is None or current is None or current <= written:
            return None
        old = cc.get_version(svc.name, svc.config_key, prev)
        now = cc.get_key(svc.name, svc.config_key)
        if dict(old.value) != dict(now.value):
            return None
        return Outcome(ConfigWritten(written, now.version), f"restored earlier (v{now.version})")

    def act(self, run: Run, io: StepIO) -> Outcome[ConfigWritten]:
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        prev, written = _written(io)
        where = f"{svc.name}/{svc.config_key}"
        if prev is None:
            raise StepFailed(f"{where} was created by this run (v{written}); there is no "
                             "earlier version to restore")
        current = cc.get_version_number(svc.name, svc.config_key)
        if current != written:
            raise StepFailed(f"{where} moved from v{written} (written by this run) to "
                             f"v{current}; left as it is")
        io.record(cas=written)
        version = cc.restore_version(svc.name, svc.config_key, prev, if_match=written)
        return Outcome(ConfigWritten(written, version),
                       f"v{prev} restored as v{version} (If-Match {written})")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[ConfigWritten]) -> Outcome[ConfigWritten]:
        return acted  # the If-Match write is its own proof
