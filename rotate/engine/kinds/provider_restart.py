"""③ ``provider.restart``: roll each provider so it reads the new value (phase 2 of the
overlap strategy rolls it once more, to drop the previous value)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, ClassVar

from rotate.core.refs import ObjectRef
from rotate.core.timestamps import parse_rfc3339, utcnow
from rotate.engine.kinds import objects
from rotate.engine.kinds.base import (
    BEGUN_UNFINISHED,
    ITSELF,
    Draft,
    Outcome,
    PlanInput,
    Run,
    StepData,
    StepKind,
    Told,
)
from rotate.engine.kinds.rolling import Restarted, RestartKind
from rotate.engine.kinds.sync_trigger import SyncTrigger, SyncTriggered
from rotate.engine.kinds.sync_wait import RetireSynced, SyncProven, SyncWait, SyncWaitRetire
from rotate.engine.model import Phase
from rotate.engine.targets import parse_workload
from rotate.stages import reloader_presence, rollout


class ProviderRestart(RestartKind):
    name: ClassVar[str] = "provider.restart"
    stage: ClassVar[int] = 3
    exit_code: ClassVar[int] = 12
    result: ClassVar[type[StepData]] = Restarted
    undo: ClassVar[tuple[type[StepKind[Any]], ...]] = ITSELF
    baselines_from: ClassVar[type[StepKind[Any]] | None] = SyncTrigger
    event_reason: ClassVar[str | None] = "RolloutRestarted"
    #: begun, its rollout not proven: the provider may run either value
    tells: ClassVar[Mapping[str, tuple[Told, ...]]] = {
        status: (Told.PROVIDER_RESTARTED,) for status in ("done", *BEGUN_UNFINISHED)}

    @classmethod
    def objects(cls, run: Run, subject: str) -> list[ObjectRef]:
        return objects.provider_workload(subject)

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        for ref in inp.credential.providers:
            if inp.credential.apply_of(ref).live:
                continue  # provider.apply changes it in place
            key = str(ref)
            if key in inp.observed.reloader:  # preflight's words (reloader_presence.wait_phrase)
                detail = inp.observed.reloader[key]
            else:
                detail = "set restartedAt (sub-second) on the pod template"
            yield Draft(key, detail, key)

    def ref(self, run: Run, subject: str) -> ObjectRef:
        return parse_workload(subject)

    def _reloader(self, run: Run, ref: ObjectRef) -> Outcome[Restarted] | None:
        """Reloader's roll of ``ref``, taken only when Reloader runs and its pods started
        after the Secret held the new value (rollout.wait_for_reloader); None: rotate rolls."""
        kube = run.adapters.kube
        obj = kube.get(ref.kind, ref.namespace, ref.name)
        secret = run.credential.secret
        other = rollout.reloader_watches(obj, secret.name)
        if other is None or self.baselines_from is None:
            return None
        by_reloader = other.startswith("Reloader")
        if by_reloader and reloader_presence.find_reloader(kube).state == "absent":
            return None  # annotated, but no Reloader runs: nobody else will roll it
        noted = run.result(self.baselines_from)
        before = noted.baseline(str(ref)) if isinstance(noted, SyncTriggered) else None
        verdict = rollout.wait_for_reloader(
            kube, ref, before or rollout.baseline(obj), secret=(secret.namespace, secret.name),
            synced_at=self._synced_at(run), grace=run.chain.defaults.reloader_grace,
            deadline=run.deadline(), cancel=run.cancel, by_reloader=by_reloader)
        came = verdict.restart
        if came is None:
            return None
        return Outcome(Restarted(came.generation, "reloader"),
                       f"{other} {verdict.why}; not rolled again")

    def _synced_at(self, run: Run) -> datetime:
        """When the Secret held the new value: ESO's refreshTime proven by sync.wait (now,
        when the journal lacks it — later than the truth, so never too lenient)."""
        proven = run.result(SyncWait)
        stamp = proven.refresh_time if isinstance(proven, SyncProven) else ""
        return parse_rfc3339(stamp) if stamp else utcnow()


class ProviderRestartRetire(ProviderRestart):
    phase: ClassVar[Phase] = "retire"
    baselines_from: ClassVar[type[StepKind[Any]] | None] = SyncWaitRetire

    def _synced_at(self, run: Run) -> datetime:
        noted = run.result(SyncWaitRetire)
        stamp = noted.refresh_time if isinstance(noted, RetireSynced) else ""
        return parse_rfc3339(stamp) if stamp else utcnow()

    @classmethod
    def plan(cls, inp: PlanInput) -> Iterable[Draft]:
        if inp.previous_key_overlap:
            for ref in inp.credential.providers:
                if inp.credential.apply_of(ref).live:
                    continue
                yield Draft(str(ref), "set restartedAt: drop the previous value", str(ref))
