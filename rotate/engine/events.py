"""Kubernetes Events about a run, on the objects it acted on: the audit trail where operators
look (``kubectl describe deploy/cart``, ``kubectl get events``).

One place emits them — the executor calls :class:`RunEvents` after each step and at the run's
end; each step kind declares only what to say and where (``event_reason``, ``objects``).  Per
step that changed something — in the cluster or behind it: the backend, the Config Center, a
provider changed live — a Normal event (any failed step: a Warning) on the object the step
acted on; a step that only proves (``sync.wait``, ``provider.wait``, ``provider.verify``,
``consumer.wait``, ``readyz.check``) has none when it passes: its proof is what the object's
success event says.  At the end, one event per object the run touched (and always on the
ExternalSecret, the credential's anchor in the cluster).  A consumer's workload gets its
success event as soon as its own last step is done — a step of the ``finish`` lane: its
rollout proven, its readyz 200, its old tokens revoked — so that ``kubectl get events -w``
shows each consumer done as it is, and the run's end sends only the rest.  A consumer's
token Secret, whose last step is its ``token.mint`` (a step of the ``prepare`` lane), gets no
success event: ``TokenMinted`` is its whole story.  A run that fails or is interrupted still
tells every touched object at its end:

=====================  =========  =================================
run                    type       reason
=====================  =========  =================================
rotation succeeded     Normal     ``CredentialRotated``
rotation failed        Warning    ``RotationFailed``
rollback succeeded     Normal     ``RolledBack``
rollback failed        Warning    ``RollbackFailed``
interrupted            Warning    ``RotationInterrupted``
=====================  =========  =================================

Invariants:

* Best effort: an event that cannot be created (forbidden, API server down, quota) never
  fails or changes the outcome of a run; the counts of events created and failed are
  journaled with ``run.end`` and shown in the report.
* Never on a step's path: an event is queued, with the time it happened, to one of
  :data:`LANES` sender threads — always the same one for the same object, so each object's
  events are posted in the order they happened (``kubectl describe`` lists them by time) —
  and no step, nor a provider switch waiting on a step, waits for an event request.
* Never in the world's way: while steps run, one event request is in flight at a time (the
  API server is busy with the rollouts the run waits for; client-go's recorder, too, sends
  one at a time).  At the run's end — the world's work done — the end events join their
  objects' lanes and the backlog goes out :data:`LANES` requests at a time.
  :meth:`RunEvents.run_end` returns once all of them are sent, or at
  :data:`FLUSH_SECONDS`, after which an unsent event counts as failed.  (At 10 consumers a
  run posts ~55 events, at 100 ~500: sent inline, each would hold its step for a round
  trip to an API server busy with the rollouts, and all of them left to the end would
  outlast the flush behind a saturated one.)
* Reason and message name steps, objects, versions and the run id — never a value (the step
  details they quote are the report's, which hold none either).
* The run id is in every message and in ``reportingInstance``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from rotate.clients.seams import Kube, KubeEvent
from rotate.core.errors import RotateError
from rotate.core.refs import ObjectRef
from rotate.core.timestamps import utcnow
from rotate.engine.kinds import find, kind_of
from rotate.engine.kinds.base import Run
from rotate.engine.model import PlannedStep
from rotate.stages import rollout

EventType = Literal["Normal", "Warning"]

#: sender threads; an object's events all go through the same one (its order kept), and
#: the event requests in flight at once at the run's end (one while steps run)
LANES = 4
#: the longest the run's end waits for its events (each request has its own timeout too)
FLUSH_SECONDS = 10.0

#: the end-of-run event by (operation, status)
END_REASONS: dict[tuple[str, str], tuple[EventType, str]] = {
    ("rotate", "succeeded"): ("Normal", "CredentialRotated"),
    ("rotate", "failed"): ("Warning", "RotationFailed"),
    ("rotate", "interrupted"): ("Warning", "RotationInterrupted"),
    ("rollback", "succeeded"): ("Normal", "RolledBack"),
    ("rollback", "rollback-failed"): ("Warning", "RollbackFailed"),
    ("rollback", "interrupted"): ("Warning", "RotationInterrupted"),
}


def objects_of(run: Run, step: PlannedStep) -> list[ObjectRef]:
    """The Kubernetes objects ``step`` acts on, as its kind declares them
    (``StepKind.objects``; none for a record that is no step kind)."""
    kind = find(step)
    return kind.objects(run, step.subject) if kind is not None else []


def step_reason(step: PlannedStep) -> str | None:
    """The reason of the Normal event a done ``step`` leaves, as its kind declares it
    (``StepKind.event_reason``; None: a step that only proves leaves none)."""
    kind = find(step)
    return kind.event_reason if kind is not None else None


@dataclass
class EventCounts:
    created: int = 0
    failed: int = 0

    def to_json(self) -> dict[str, int]:
        return {"created": self.created, "failed": self.failed}


class _Gate:
    """At most ``allowed`` callers inside at once; :meth:`widen` lets more in."""

    def __init__(self, allowed: int) -> None:
        self._cond = threading.Condition()
        self._allowed, self._inside = allowed, 0

    def __enter__(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._inside < self._allowed)
            self._inside += 1

    def __exit__(self, *_exc: object) -> None:
        with self._cond:
            self._inside -= 1
            self._cond.notify_all()

    def widen(self, allowed: int) -> None:
        with self._cond:
            self._allowed = max(self._allowed, allowed)
            self._cond.notify_all()


class RunEvents:
    """Emits a run's events through the Kube seam; thread-safe (parallel steps)."""

    def __init__(self, run: Run, uids: Mapping[ObjectRef, str] | None = None,
                 run_of: Callable[[PlannedStep], Run] | None = None) -> None:
        """``run_of``: the run a step acts through (a run of several credentials: its
        credential's, whose objects its events go to); ``run`` by default."""
        self._run = run
        self._run_of: Callable[[PlannedStep], Run] = run_of or (lambda _step: run)
        self._kube: Kube = run.adapters.kube
        self._lock = threading.Lock()
        self._uids: dict[ObjectRef, str] = dict(uids or {})  # known: no GET
        cred = run.credential
        es = ObjectRef("ExternalSecret", cred.external_secret.namespace,
                       cred.external_secret.name)
        self._touched: dict[ObjectRef, None] = {es: None}
        self.counts = EventCounts()
        self._lanes: list[ThreadPoolExecutor] = []  # one thread each (module doc)
        self._lane_of: dict[ObjectRef, int] = {}
        self._queued: list[Future[bool]] = []
        self._gate = _Gate(1)  # LANES once the run ends (module doc)
        self._finishing: dict[ObjectRef, int] = {}  # workload → its last step's index
        self._finished: set[ObjectRef] = set()  # success event already queued
        self._quiet: set[ObjectRef] = set()  # no success event: a token Secret (module doc)

    @property
    def _suffix(self) -> str:
        run = self._run
        what = "rollback" if run.start.operation == "rollback" else "rotate"
        return f"({what} run {run.run_id}, credential {run.start.credential})"

    def expect(self, steps: Sequence[PlannedStep]) -> None:
        """The steps the run is about to execute: an object whose last step among them is of
        the ``finish`` lane (a consumer's workload) gets its success event once that step
        is done; one whose last step is of the ``prepare`` lane (a token Secret) gets none
        (module doc)."""
        last: dict[ObjectRef, PlannedStep] = {}
        for step in steps:
            for ref in objects_of(self._run_of(step), step):
                last[ref] = step
        with self._lock:
            self._finishing = {ref: st.index for ref, st in last.items()
                               if kind_of(st).lane == "finish"}
            self._quiet = {ref for ref, st in last.items() if kind_of(st).lane == "prepare"}

    def step_done(self, step: PlannedStep, detail: str) -> None:
        reason = step_reason(step)
        success = END_REASONS.get((self._run.start.operation, "succeeded"))
        for ref in self._touch(step):
            if reason:
                self._enqueue(ref, "Normal", reason, step.kind,
                              f"Step {step.index} {step.kind} {step.target}: {detail} "
                              + self._suffix)
            with self._lock:
                done = self._finishing.get(ref) == step.index
                if done:
                    self._finished.add(ref)
            if done and success is not None:
                self._enqueue(ref, success[0], success[1], self._run.start.operation,
                              self._success_text())

    def step_failed(self, step: PlannedStep, message: str) -> None:
        for ref in self._touch(step):
            self._enqueue(ref, "Warning", "StepFailed", step.kind,
                          f"Step {step.index} {step.kind} {step.target} failed: {message} "
                          + self._suffix)

    def run_end(self, status: str, message: str = "") -> None:
        """One event per touched object; ``message`` is the run's (what failed, the state,
        the next command) — the report's words, which hold no value.  Returns once every
        event of the run is sent, or counted failed (module doc)."""
        run = self._run
        deadline = time.monotonic() + FLUSH_SECONDS
        found = END_REASONS.get((run.start.operation, status))
        if found is not None:
            etype, reason = found
            succeeded = status == "succeeded"
            text = self._success_text() if succeeded else f"{message or status} {self._suffix}"
            with self._lock:
                touched = [ref for ref in self._touched if not (
                    succeeded and (ref in self._finished or ref in self._quiet))]
            for ref in touched:
                self._enqueue(ref, etype, reason, run.start.operation, text)
        self._gate.widen(LANES)
        self._drain(deadline)

    def _success_text(self) -> str:
        run = self._run
        what = ("restored the value before run " + (run.start.of_run or "?")
                if run.start.operation == "rollback" else "rotated the credential")
        return f"{what} {self._suffix}"

    def _enqueue(self, ref: ObjectRef, etype: EventType, reason: str, action: str,
                 message: str) -> None:
        """Hand an event, stamped now, to its object's sender thread (module doc)."""
        at = utcnow()
        with self._lock:
            lane = self._lane_of.setdefault(ref, len(self._lane_of) % LANES)
            while len(self._lanes) <= lane:
                self._lanes.append(ThreadPoolExecutor(max_workers=1,
                                                      thread_name_prefix="rotate-event"))
            self._queued.append(self._lanes[lane].submit(self._emit, ref, etype, reason,
                                                         action, message, at))

    def _drain(self, deadline: float) -> None:
        with self._lock:
            queued, self._queued = self._queued, []
            lanes, self._lanes = self._lanes, []
            self._lane_of.clear()
        self._settle(queued, deadline)
        for lane in lanes:
            lane.shutdown(wait=False, cancel_futures=True)

    def _settle(self, futures: list[Future[bool]], deadline: float) -> None:
        """Wait for ``futures`` until ``deadline`` and count them: created when the request
        succeeded, failed otherwise — a request still running at the deadline too (counted
        once: if it completes later, the counts already journaled do not change)."""
        done, _ = wait(futures, timeout=max(0.0, deadline - time.monotonic()))
        created = sum(1 for f in done if f.exception() is None and f.result())
        with self._lock:
            self.counts.created += created
            self.counts.failed += len(futures) - created

    # ------------------------------------------------------------------ internals

    def _touch(self, step: PlannedStep) -> list[ObjectRef]:
        refs = objects_of(self._run_of(step), step)
        with self._lock:
            for ref in refs:
                self._touched.setdefault(ref, None)
        return refs

    def _uid(self, ref: ObjectRef) -> str:
        with self._lock:
            known = self._uids.get(ref)
        if known is not None:
            return known
        try:
            obj = self._kube.get(ref.kind, ref.namespace, ref.name)
            uid = str(rollout.metadata(obj).get("uid") or "")
        except RotateError:
            uid = ""
        with self._lock:
            self._uids[ref] = uid
        return uid

    def _emit(self, ref: ObjectRef, etype: EventType, reason: str, action: str,
              message: str, at: datetime) -> bool:
        """Send one event; whether it was created (counted by :meth:`_settle`)."""
        with self._gate:
            event = KubeEvent(involved=ref, uid=self._uid(ref), type=etype, reason=reason,
                              message=message, action=action, instance=self._run.run_id,
                              at=at)
            try:
                self._kube.create_event(event)
            except Exception:  # best effort: counted, journaled with run.end, never raised
                return False
            return True
