"""① ``backend.write``: the new value as a new version, check-and-set on the version the run
read; a rollback's form writes version N's data as a new version instead.

``backend.adopt`` (``rotate CREDENTIAL --adopt``) is planned in its place when the backend
already holds a value no rotate run wrote: it writes nothing, and proves that the version
the plan showed (M) is still current;
its result has the same shape as a write's (``previous_version`` W, the version the chain
held; ``version`` M), so every later step, the report, resume and rollback read it as they
read a write's: a rollback of an adopt run writes W's data back as a new version, as it
would after a write."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rotate.core.errors import ConflictError, StepFailed
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret, generate
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
from rotate.engine.model import Phase
from rotate.engine.targets import backend_target
from rotate.providers.accounts import accounts_for, active_username
from rotate.stages import backend


@dataclass(frozen=True)
class BackendWritten(StepData):
    previous_version: int
    version: int


def written_version(run: Run) -> int | None:
    """The version this run's ``backend.write`` step put in the backend (either form), or
    the one its ``backend.adopt`` carries."""
    for kind in (BackendWrite, BackendRestore, BackendAdopt):
        done = run.result(kind)
        if done is not None:
            return done.version
    return None


def ensure_value(run: Run) -> Secret:
    """The value this run put in the backend (re-read from it on resume, never regenerated)."""
    if run.value is None:
        version = written_version(run)
        if version is None:  # a rollback that wrote nothing: whatever the backend holds now
            version = backend.current_version(run.adapters.vault, run.path)
        run.value = backend.read_value(run.adapters.vault, run.path,
                                       run.credential.backend.key, version)
    return run.value


def _version_detail(n: int | None) -> str:
    if n is None:
        return "version unknown (backend unreachable in preflight)"
    if n == 0:
        return "create v1 (cas=0)"
    return f"v{n} → v{n + 1} (cas={n})"


def _fresh_value(run: Run) -> Secret:
    if run.new_value is not None:
        return run.new_value
    gen = run.credential.generate
    if gen is None:
        raise StepFailed("this credential's value comes from stdin and none was given; run "
                         f"`rotate {run.credential.name} --confirm --value-stdin` again")
    return generate(gen.length, gen.alphabet)


def _moved_usernames(run: Run, version: int | None) -> dict[str, Secret]:
    """Alternating users under overlap: ``usernameKey`` := the inactive role, written with the
    password so the consumers move to both together (docs/chain-file.md)."""
    if str(run.start.strategy) != "overlap" or not version:
        return {}
    out: dict[str, Secret] = {}
    for ref in run.credential.providers:
        applied = run.credential.apply_of(ref)
        if applied.users is None or applied.username_key is None:
            continue
        active = active_username(run.adapters.vault, run.path, applied.username_key, version)
        out[applied.username_key] = Secret(accounts_for(applied, "overlap", active).new)
    return out


class BackendRestore(StepKind[BackendWritten]):
    """A rollback's backend.write: version N's data written as a new version."""

    name: ClassVar[str] = "backend.write"
    phase: ClassVar[Phase] = "restore"
    stage: ClassVar[int] = 1
    exit_code: ClassVar[int] = 10
    result: ClassVar[type[StepData]] = BackendWritten
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()
    event_reason: ClassVar[str | None] = "BackendRestored"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.BACKEND_WRITTEN,)}
    writes_value: ClassVar[bool] = True
    writes_backend: ClassVar[bool] = True
    legacy_rollback_form: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.external_secret(run)  # it reads that path

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.restore is None:
            return
        yield Draft(backend_target(inp.chain, inp.credential),
                    f"write v{inp.restore.backend_version}'s data as a new version"
                    + ("; the replaced value stays valid as the previous one"
                       if inp.restore.of_overlap else ""))

    def observe(self, run: Run, io: StepIO) -> Outcome[BackendWritten] | None:
        if "cas" not in io.prior:
            return None
        cas = int(io.prior["cas"])
        version = backend.observe(run.adapters.vault, run.path, run.run_id, cas)
        if version is None:
            return None
        run.value = backend.read_value(run.adapters.vault, run.path,
                                       run.credential.backend.key, version)
        return Outcome(BackendWritten(cas, version), f"restored earlier (v{version})")

    def act(self, run: Run, io: StepIO) -> Outcome[BackendWritten]:
        vault, key = run.adapters.vault, run.credential.backend.key
        restore_to = run.start.restore_backend_version
        if restore_to is None:
            raise StepFailed(f"run {run.run_id} is not a rollback: no version to restore")
        io.record(cas=backend.current_version(vault, run.path), restore_to=restore_to)
        w = backend.restore(vault, run.path, key, restore_to, run.run_id,
                            previous_key=run.overlap_key)
        run.value = backend.read_value(vault, run.path, key, w.version)
        return Outcome(BackendWritten(w.previous_version, w.version),
                       f"v{restore_to}'s data written as v{w.version}")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[BackendWritten]) -> Outcome[BackendWritten]:
        return acted  # the check-and-set write is its own proof


class BackendWrite(StepKind[BackendWritten]):
    name: ClassVar[str] = "backend.write"
    stage: ClassVar[int] = 1
    exit_code: ClassVar[int] = 10
    result: ClassVar[type[StepData]] = BackendWritten
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = (BackendRestore,)
    event_reason: ClassVar[str | None] = "BackendWritten"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.BACKEND_WRITTEN,)}
    writes_value: ClassVar[bool] = True
    writes_backend: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.external_secret(run)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.adopt is not None:
            return  # backend.adopt carries the value the backend already holds
        detail = _version_detail(inp.observed.current_version)
        if inp.overlap and inp.credential.overlap is not None:
            detail += f"; {inp.credential.overlap.previous_key} keeps the previous value"
        yield Draft(backend_target(inp.chain, inp.credential), detail)

    def observe(self, run: Run, io: StepIO) -> Outcome[BackendWritten] | None:
        if "previous_version" not in io.prior:
            return None
        n = int(io.prior["previous_version"])
        version = backend.observe(run.adapters.vault, run.path, run.run_id, n)
        if version is None:
            return None
        run.value = backend.read_value(run.adapters.vault, run.path,
                                       run.credential.backend.key, version)
        return Outcome(BackendWritten(n, version),
                       f"v{version} was already written by this run; not written again")

    def act(self, run: Run, io: StepIO) -> Outcome[BackendWritten]:
        vault = run.adapters.vault
        expected: int | None
        if "previous_version" in io.prior:
            expected = int(io.prior["previous_version"])
        else:
            expected = run.start.current_version
            io.record(previous_version=backend.current_version(vault, run.path))
        value = _fresh_value(run)
        overlap = run.credential.overlap
        w = backend.write(vault, run.path, run.credential.backend.key, value, run.run_id,
                          expected_version=expected,
                          previous_key=overlap.previous_key if overlap else None,
                          keep_previous=run.overlap_key is not None,
                          also=_moved_usernames(run, int(io.prior["previous_version"])))
        run.value = value
        return Outcome(BackendWritten(w.previous_version, w.version),
                       f"v{w.previous_version} → v{w.version} (cas={w.previous_version})")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[BackendWritten]) -> Outcome[BackendWritten]:
        return acted  # the check-and-set write is its own proof


class BackendAdopt(StepKind[BackendWritten]):
    """``--adopt``: the backend's current version M, which no rotate run wrote, is the run's
    value.  Nothing is written: the step proves M is still the current version (a write
    since the plan fails it, exit 10, nothing changed) and reads its value.  M is named as
    rotate's in the path's custom metadata only once the whole chain holds it, by the run's
    last step (``backend.confirm``): a run stopped half-way leaves the metadata naming the
    version the rest of the chain may still hold, and its rollback nothing to correct."""

    name: ClassVar[str] = "backend.adopt"
    stage: ClassVar[int] = 1
    exit_code: ClassVar[int] = 10
    result: ClassVar[type[StepData]] = BackendWritten
    #: a rollback writes W's data (the value the chain held before) as a new version
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = (BackendRestore,)
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.BACKEND_WRITTEN,)}
    writes_value: ClassVar[bool] = True
    #: its data's ``version`` (M) is the one a rollback expects to find current
    writes_backend: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.external_secret(run)  # proves only: a Warning when it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.adopt is None:
            return
        a = inp.adopt
        yield Draft(backend_target(inp.chain, inp.credential),
                    f"adopt v{a.version} (not written by rotate) in place of "
                    f"v{a.chain_version}, the chain's; no new version")

    def observe(self, run: Run, io: StepIO) -> Outcome[BackendWritten] | None:
        return None  # writes nothing: the proof is repeated on every attempt

    def act(self, run: Run, io: StepIO) -> Outcome[BackendWritten]:
        adopted, chain_version = run.start.adopted, run.start.adopted_from
        if adopted is None or chain_version is None:
            raise StepFailed(f"run {run.run_id} is not an adopt run: no version to adopt")
        current = backend.current_version(run.adapters.vault, run.path)
        if current != adopted:
            raise ConflictError(
                "vault", f"adopt {run.path}",
                f"version moved from {adopted} to {current} since the plan; nothing was "
                f"changed: settle this run with `rotate rollback {run.run_id} --confirm` "
                f"(nothing to roll back), then plan again (`rotate {run.credential.name} "
                "--adopt`)")
        run.value = backend.read_value(run.adapters.vault, run.path,
                                       run.credential.backend.key, adopted)
        return Outcome(BackendWritten(chain_version, adopted),
                       f"v{adopted} adopted (the chain held v{chain_version}); no version "
                       "written")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[BackendWritten]) -> Outcome[BackendWritten]:
        return acted
