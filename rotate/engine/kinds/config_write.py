"""④ ``config.write``: each consumer's harvested document written, If-Match the version read
before (create: If-None-Match *); a rollback's form restores the version it had before.

``config.undo`` takes a prepared ``config.write`` back within the run.  Never planned: the
executor adds it when the stage a document was written ahead of fails (rotate.engine.undo).
It restores the version the document had before the run as a new version, If-Match the
version *this run wrote* — a document someone changed since is left alone and the step
fails, naming it.  ``io.prior["undoes"]`` holds the journaled data of the ``config.write``
step it undoes (``previous_version``, ``version``).  It lives here, before the kind it
undoes, so that ``ConfigWrite`` names its ``compensate`` in its own class body.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.errors import ConflictError, PermanentError, StepFailed
from rotate.core.refs import ObjectRef
from rotate.core.secret import reveal_tree
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import (
    Draft,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepIO,
    StepKind,
    Told,
)
from rotate.engine.kinds.config_harvest import document
from rotate.engine.model import Phase


@dataclass(frozen=True)
class ConfigWritten(StepData):
    previous_version: int | None  # None: the key did not exist
    version: int


def _target(inp: PlanInput, name: str) -> str:
    svc = inp.chain.services[name]
    return f"{svc.namespace}/{name} {svc.config_key}"


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
    writes_document: ClassVar[bool] = True
    undone_words: ClassVar[str | None] = "the documents of {} restored"
    event_reason: ClassVar[str | None] = "ConfigUndone"

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)

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


class ConfigRestore(StepKind[ConfigWritten]):
    """A rollback's config.write: the version a document had before the run, as a new one."""

    name: ClassVar[str] = "config.write"
    phase: ClassVar[Phase] = "restore"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 13
    parallel: ClassVar[bool] = True  # one consumer each: independent requests
    result: ClassVar[type[StepData]] = ConfigWritten
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()
    event_reason: ClassVar[str | None] = "ConfigRestored"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.DOCUMENT_WRITTEN,)}
    writes_document: ClassVar[bool] = True
    legacy_rollback_form: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)  # the workload that reads it

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.restore is None:
            return
        for name in inp.consumers:
            if name in inp.restore.config_versions:
                yield Draft(_target(inp, name), f"restore v{inp.restore.config_versions[name]}",
                            name)

    def _restore_to(self, run: Run, name: str) -> int:
        version = run.start.restore_config.get(name)
        if version is None:
            raise StepFailed(f"run {run.run_id} recorded no version of {name}'s document "
                             "to restore")
        return version

    def observe(self, run: Run, io: StepIO) -> Outcome[ConfigWritten] | None:
        if "cas" not in io.prior:
            return None
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        cas = int(io.prior["cas"])
        current = cc.get_version_number(svc.name, svc.config_key)
        if current is None or current <= cas:
            return None
        old = cc.get_version(svc.name, svc.config_key, self._restore_to(run, svc.name))
        now = cc.get_key(svc.name, svc.config_key)
        if dict(old.value) != dict(now.value):
            return None
        return Outcome(ConfigWritten(cas, now.version), f"restored earlier (v{now.version})")

    def act(self, run: Run, io: StepIO) -> Outcome[ConfigWritten]:
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        restore_to = self._restore_to(run, svc.name)
        current = cc.get_version_number(svc.name, svc.config_key)
        if current is None:
            raise PermanentError("config center", f"{svc.name}/{svc.config_key}",
                                 "key no longer exists")
        # If-Match the version the run wrote: an edit made since then answers 412 instead of
        # being overwritten; the current one only when --force overrode it
        cas = run.start.restore_config_match.get(svc.name, current)
        io.record(cas=cas)
        version = cc.restore_version(svc.name, svc.config_key, restore_to, if_match=cas)
        return Outcome(ConfigWritten(current, version), f"v{restore_to} restored as v{version}")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[ConfigWritten]) -> Outcome[ConfigWritten]:
        return acted  # the If-Match write is its own proof


class ConfigWrite(StepKind[ConfigWritten]):
    name: ClassVar[str] = "config.write"
    stage: ClassVar[int] = 4
    exit_code: ClassVar[int] = 13
    parallel: ClassVar[bool] = True  # one consumer each: independent requests
    lane: ClassVar[str | None] = "prepare"  # its consumer's token and restart follow
    prepares: ClassVar[bool] = True  # pods read it only at start: safe before the switch
    result: ClassVar[type[StepData]] = ConfigWritten
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = (ConfigRestore,)
    compensate: ClassVar[type[StepKind[Any]] | None] = ConfigUndo
    event_reason: ClassVar[str | None] = "ConfigWritten"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.DOCUMENT_WRITTEN,)}
    writes_document: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.consumer_workload(run, subject)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for name in inp.consumers:
            prev = inp.observed.config_versions.get(name)
            yield Draft(_target(inp, name),
                        f"v{prev} → v{prev + 1} (If-Match {prev})" if prev is not None
                        else "create (If-None-Match *)", name)

    def observe(self, run: Run, io: StepIO) -> Outcome[ConfigWritten] | None:
        if "previous_version" not in io.prior:
            return None
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        doc = document(run, svc.name)
        prev = io.prior["previous_version"]
        current = cc.get_version_number(svc.name, svc.config_key)
        if current == prev:
            return None  # not written yet: act writes If-Match prev
        now = cc.get_key(svc.name, svc.config_key)
        if dict(now.value) == reveal_tree(doc):
            return Outcome(ConfigWritten(prev, now.version), f"already written (v{now.version})")
        raise ConflictError("config center", f"write {svc.name}/{svc.config_key}",
                            f"version moved from v{prev} to v{current} since this run read it")

    def act(self, run: Run, io: StepIO) -> Outcome[ConfigWritten]:
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        doc = document(run, svc.name)
        if "previous_version" in io.prior:
            prev = io.prior["previous_version"]
        else:  # the version preflight read (the plan's If-Match), else read it now
            seen = run.observed.config_versions
            prev = (seen[svc.name] if svc.name in seen
                    else cc.get_version_number(svc.name, svc.config_key))
            io.record(previous_version=prev)
        version = cc.put_key(svc.name, svc.config_key, doc,
                             if_match=int(prev) if prev is not None else None)
        shown = f"v{prev} → v{version}" if prev is not None else f"created v{version}"
        return Outcome(ConfigWritten(prev, version), shown)

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[ConfigWritten]) -> Outcome[ConfigWritten]:
        return acted  # the If-Match write is its own proof
