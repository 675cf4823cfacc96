"""④ ``config.write``: the pointers the credential owns of each consumer's harvested document
written onto the document as it is now, If-Match the version just read (create: If-None-Match
*); a rollback's form restores the owned values the document had before the run.

Only owned pointers are ever written (rotate.stages.documents): a consumer's document also
holds other credentials' values, which a concurrent run of such a credential may be changing.
A 412 re-reads and merges when none of the owned pointers moved since the version the run read
before it changed anything; one that moved stops the step (exit 13), nothing written.  The
journal holds the pointers and versions, never a value.

``config.undo`` takes a prepared ``config.write`` back within the run.  Never planned: the
executor adds it when the stage a document was written ahead of fails (rotate.engine.undo).
It puts back the owned values the document had before the run onto the current document,
as a new version, when the owned pointers still hold what *this run wrote* — one someone
changed since is left alone and the step fails, naming it; other pointers are never touched.
``io.prior["undoes"]`` holds the journaled data of the ``config.write`` step it undoes
(``previous_version``, ``version``).  It lives here, before the kind it undoes, so that
``ConfigWrite`` names its ``compensate`` in its own class body.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.errors import StepFailed
from rotate.core.refs import ObjectRef
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
from rotate.stages import documents


@dataclass(frozen=True)
class ConfigWritten(StepData):
    previous_version: int | None  # None: the key did not exist
    version: int
    #: the JSON pointers written (the credential's own); () in older journals
    pointers: tuple[str, ...] = ()


def owned(run: Run, name: str) -> tuple[str, ...]:
    """The pointers of ``name``'s document the run's credential owns."""
    return documents.owned_pointers(run.service(name), run.credential.secret)


def _moved_hint(run: Run, base: int | None) -> str:
    at = f"v{base}" if base is not None else "before the run"
    return (f"this run writes only when they hold what they held at {at}: put them back as "
            f"they were, then resume; or undo the run with `rotate rollback {run.run_id} "
            "--confirm --force` (it restores only the pointers this credential owns)")


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
        return None  # act compares the owned values: restoring twice writes nothing

    def act(self, run: Run, io: StepIO) -> Outcome[ConfigWritten]:
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        prev, written = _written(io)
        where = f"{svc.name}/{svc.config_key}"
        if prev is None:
            raise StepFailed(f"{where} was created by this run (v{written}); there is no "
                             "earlier version to restore")
        pointers = owned(run, svc.name)
        io.record(cas=written, pointers=list(pointers))
        done = documents.restore_owned(cc, svc.name, svc.config_key, pointers,
                                       restore_from=prev, reference=written)
        if not done.changed:
            return Outcome(ConfigWritten(written, done.version, pointers),
                           f"already holds v{prev}'s values (v{done.version})")
        return Outcome(ConfigWritten(written, done.version, pointers),
                       f"v{prev}'s {len(pointers)} owned value(s) restored as v{done.version}")

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
        return None  # act compares the owned values: restoring twice writes nothing

    def act(self, run: Run, io: StepIO) -> Outcome[ConfigWritten]:
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        restore_to = self._restore_to(run, svc.name)
        pointers = owned(run, svc.name)
        # the owned values must still be what the run wrote (an edit made since fails the
        # step instead of being overwritten); no reference only when --force overrode it
        reference = run.start.restore_config_match.get(svc.name)
        io.record(cas=reference, pointers=list(pointers))
        done = documents.restore_owned(
            cc, svc.name, svc.config_key, pointers, restore_from=restore_to, reference=reference,
            hint=f"someone changed them while the rollback ran; `rotate rollback "
                 f"{run.start.of_run} --confirm --force` restores them anyway (only the owned "
                 "pointers)")
        if not done.changed:
            return Outcome(ConfigWritten(done.version, done.version, pointers),
                           f"already holds v{restore_to}'s values (v{done.version})")
        return Outcome(ConfigWritten(done.base, done.version, pointers),
                       f"v{restore_to}'s {len(pointers)} owned value(s) restored as "
                       f"v{done.version}")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[ConfigWritten]) -> Outcome[ConfigWritten]:
        return acted  # the If-Match write is its own proof


class ConfigWrite(StepKind[ConfigWritten]):
    name: ClassVar[str] = "config.write"
    per_wave: ClassVar[bool] = True
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
        return None  # act reads the document first: already written is its first answer

    def act(self, run: Run, io: StepIO) -> Outcome[ConfigWritten]:
        cc, svc = run.adapters.config_center, run.service(io.step.subject)
        doc = document(run, svc.name)
        pointers = owned(run, svc.name)
        if "previous_version" in io.prior:
            prev = io.prior["previous_version"]
        else:  # the version preflight read (the plan's If-Match), else read it now
            seen = run.observed.config_versions
            prev = (seen[svc.name] if svc.name in seen
                    else cc.get_version_number(svc.name, svc.config_key))
            io.record(previous_version=prev, pointers=list(pointers))
        base = int(prev) if prev is not None else None

        def attempt(version: int | None) -> None:
            if version is not None:  # If-Match version: applied, it is version + 1
                io.record(attempts=[*io.prior.get("attempts", []), version])

        def lost(version: int | None) -> None:
            if version is not None:  # answered 412: certainly not applied
                io.record(lost=[*io.prior.get("lost", []), version])

        done = documents.write_owned(
            cc, svc.name, svc.config_key, pointers, documents.owned_values(doc, pointers),
            base=base, full=doc, on_attempt=attempt, on_lost=lost, hint=_moved_hint(run, base))
        if not done.changed:
            shown = f"already written (v{done.version})"
        elif base is None:
            shown = f"created v{done.version}"
        elif done.merged:
            shown = (f"v{prev} → v{done.version}, merged onto v{done.base} (another writer's "
                     f"change kept; {len(pointers)} owned pointer(s) written)")
        else:
            shown = f"v{prev} → v{done.version}"
        return Outcome(ConfigWritten(base, done.version, pointers), shown)

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[ConfigWritten]) -> Outcome[ConfigWritten]:
        return acted  # the If-Match write is its own proof
