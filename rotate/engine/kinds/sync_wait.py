"""② ``sync.wait``: ESO reports the sync done after the trigger, and the Secret holds the
value — the new one, the restored one (a rollback), or, in overlap phase 2, the current
value under the previous key (that form triggers by itself on every attempt)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from rotate.core.errors import StepFailed
from rotate.core.refs import ObjectRef
from rotate.core.timestamps import parse_rfc3339
from rotate.engine.kinds import objects
from rotate.engine.kinds.backend_write import ensure_value
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
from rotate.engine.kinds.sync_trigger import (
    SyncTrigger,
    SyncTriggered,
    external_secret_of,
    trigger,
    trigger_other,
)
from rotate.engine.model import Phase
from rotate.stages import sync
from rotate.stages.secret_readers import maps_path


@dataclass(frozen=True)
class SyncProven(StepData):
    refresh_time: str


@dataclass(frozen=True)
class RetireSynced(SyncTriggered):
    refresh_time: str


class SyncWaitRestored(StepKind[SyncProven]):
    """A rollback's sync.wait: the Secret holds the restored value."""

    name: ClassVar[str] = "sync.wait"
    phase: ClassVar[Phase] = "restore"
    stage: ClassVar[int] = 2
    exit_code: ClassVar[int] = 11
    result: ClassVar[type[StepData]] = SyncProven
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ()
    resume_after: ClassVar[str | None] = SyncTrigger.name
    holds: ClassVar[str] = "restored value"
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.SECRET_SYNCED,)}
    legacy_rollback_form: ClassVar[bool] = True

    syncs_external_secret: ClassVar[bool] = True

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        if subject:  # a further ExternalSecret: its Warning goes there
            return external_secret_of(run, subject)
        return objects.target_secret(run)  # proves only: a Warning there when it fails

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.restore is not None:
            yield Draft(str(inp.credential.secret), "until the Secret holds the restored value")
            yield from cls._others(inp, "until its Secret holds the restored value")

    @staticmethod
    def _others(inp: PlanInput, words: str) -> Iterable[Draft]:
        for short in inp.observed.external_secrets:
            yield Draft(short, f"{words} (another ExternalSecret of the path)", short)

    @staticmethod
    def _target(run: Run, subject: str) -> tuple[tuple[str, str], tuple[str, str, str]]:
        """The ExternalSecret a step on ``subject`` proves, and its target Secret's key."""
        if not subject:
            es, sec = run.credential.external_secret, run.credential.secret
            return (es.namespace, es.name), (sec.namespace, sec.name, sec.key)
        ns, name = subject.split("/", 1)
        mapped = maps_path(run.adapters.kube.get("ExternalSecret", ns, name),
                           run.credential.backend.path, run.credential.backend.key)
        if mapped is None:
            raise StepFailed(f"ExternalSecret {subject} no longer maps "
                             f"{run.credential.backend.path}#{run.credential.backend.key}")
        return (ns, name), (ns, mapped[0], mapped[1])

    def observe(self, run: Run, io: StepIO) -> Outcome[SyncProven] | None:
        return None

    def act(self, run: Run, io: StepIO) -> Outcome[SyncProven]:
        return Outcome(SyncProven(""), "")  # nothing to change: sync.trigger asked

    def prove(self, run: Run, io: StepIO, acted: Outcome[SyncProven]) -> Outcome[SyncProven]:
        trig = run.result(SyncTrigger, io.step.subject)
        if trig is None:
            raise StepFailed("sync.wait runs after sync.trigger, which is not done")
        es, sec = self._target(run, io.step.subject)
        proof = sync.wait(run.adapters.kube, es, sec, ensure_value(run),
                          parse_rfc3339(trig.trigger_time), deadline=run.deadline(),
                          cancel=run.cancel)
        return Outcome(SyncProven(proof.refresh_time),
                       f"Ready/SecretSynced at {proof.refresh_time}; the Secret holds the "
                       + self.holds)


class SyncWait(SyncWaitRestored):
    phase: ClassVar[Phase] = "main"
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = (SyncWaitRestored,)
    holds: ClassVar[str] = "new value"
    syncs: ClassVar[bool] = True
    legacy_rollback_form: ClassVar[bool] = False

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        yield Draft(str(inp.credential.secret), "until Ready/SecretSynced, refreshTime ≥ "
                    "trigger and the Secret holds the new value")
        yield from cls._others(inp, "until Ready/SecretSynced, refreshTime ≥ trigger and its "
                               "Secret holds the new value")


class SyncWaitRetire(StepKind[RetireSynced]):
    """Overlap phase 2: trigger and wait in one step (a fresh trigger on every attempt, so a
    resumed wait always has a request ESO has not answered yet).  One per ExternalSecret of
    the path, as in phase 1: a further one (subject ``NS/NAME``) that maps the previous key
    too must stop holding the old value there; one that does not is proven synced after the
    trigger with its copy of the key still on the new value."""

    name: ClassVar[str] = "sync.wait"
    phase: ClassVar[Phase] = "retire"
    stage: ClassVar[int] = 2
    exit_code: ClassVar[int] = 11
    result: ClassVar[type[StepData]] = RetireSynced
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {"done": (Told.SECRET_SYNCED,)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        if subject:
            return external_secret_of(run, subject)
        return objects.target_secret(run)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if not inp.previous_key_overlap:
            return
        prev = inp.credential.overlap.previous_key if inp.credential.overlap else "?"
        sec = inp.credential.secret
        yield Draft(f"{sec.namespace}/{sec.name}#{prev}",
                    f"force-sync again, until the Secret's {prev} holds the new value")
        for short in inp.observed.external_secrets:
            yield Draft(short, f"force-sync again, until its Secret's {prev} (where it maps "
                        "it) holds the new value (another ExternalSecret of the path)", short)

    def observe(self, run: Run, io: StepIO) -> Outcome[RetireSynced] | None:
        return None

    def act(self, run: Run, io: StepIO) -> Outcome[RetireSynced]:
        subject = io.step.subject
        t = trigger_other(run, subject) if subject else trigger(run)
        io.record(stamp=t.stamp, trigger_time=t.trigger_time, baselines=dict(t.baselines))
        return Outcome(RetireSynced(t.stamp, t.trigger_time, t.baselines, ""), "")

    def prove(self, run: Run, io: StepIO,
              acted: Outcome[RetireSynced]) -> Outcome[RetireSynced]:
        prev_key = run.overlap_key or ""
        es, sec = self._target(run, io.step.subject, prev_key)
        proof = sync.wait(run.adapters.kube, es, sec, ensure_value(run),
                          parse_rfc3339(acted.data.trigger_time), deadline=run.deadline(),
                          cancel=run.cancel)
        return Outcome(replace(acted.data, refresh_time=proof.refresh_time),
                       f"Ready/SecretSynced at {proof.refresh_time}; the Secret's {sec[2]} "
                       "holds the current value")

    @staticmethod
    def _target(run: Run, subject: str, prev_key: str
                ) -> tuple[tuple[str, str], tuple[str, str, str]]:
        """The ExternalSecret and the key of its Secret proven: the previous key where the
        ExternalSecret maps it, else its copy of the credential's key."""
        if not subject:
            es, sec = run.credential.external_secret, run.credential.secret
            return (es.namespace, es.name), (sec.namespace, sec.name, prev_key)
        ns, name = subject.split("/", 1)
        obj = run.adapters.kube.get("ExternalSecret", ns, name)
        path = run.credential.backend.path
        mapped = maps_path(obj, path, prev_key) or maps_path(obj, path,
                                                            run.credential.backend.key)
        if mapped is None:
            raise StepFailed(f"ExternalSecret {subject} no longer maps "
                             f"{path}#{run.credential.backend.key}")
        return (ns, name), (ns, mapped[0], mapped[1])
