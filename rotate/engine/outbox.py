"""Deliveries off a run's critical path: one background thread, each delivery retried with
back-off, the whole outbox flushed with a deadline at the run's end.

Invariants:

* Never on a step's path: :meth:`Outbox.put` only queues; one daemon thread per receiver
  delivers, in the order queued (a run's start notice before its end notice), so a receiver
  that hangs delays no other.
* Bounded: a delivery makes at most :attr:`Delivery.attempts` attempts, and none starts
  after its budget (``budget`` seconds from when it was queued) — the back-off sleeps and
  each attempt's timeout are cut to what is left of it.  A PermanentError (an answer no
  retry changes) ends it at once.
* Never fails a run: :meth:`Outbox.close` returns by its deadline whatever the receivers do;
  what is undelivered then is counted as failed, with a reason that names the delivery by
  what it was given (never an address that may carry a token, never a value).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rotate.core.errors import ClientError, PermanentError


@dataclass(frozen=True)
class Delivery:
    """How hard one delivery tries (within its budget)."""

    attempts: int = 4
    first_backoff: float = 0.5  # doubled after each failed attempt
    max_backoff: float = 4.0
    request_timeout: float = 5.0  # one attempt, connect and answer


@dataclass(frozen=True, eq=False)
class Job:
    """``what`` names the delivery in a failure; ``send(timeout)`` makes one attempt;
    ``receiver`` orders it behind the earlier jobs to the same one (default: ``what``)."""

    what: str
    send: Callable[[float], None]
    receiver: str = ""

    @property
    def lane(self) -> str:
        return self.receiver or self.what


@dataclass
class OutboxCounts:
    delivered: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"delivered": self.delivered, "failed": self.failed,
                "failures": list(self.failures)}


class Outbox:
    """Thread-safe; a receiver's thread starts with its first :meth:`put`."""

    def __init__(self, delivery: Delivery, budget: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._delivery = delivery
        self._budget = budget
        self._clock = clock
        self._cond = threading.Condition()
        self._lanes: dict[str, queue.Queue[tuple[Job, float] | None]] = {}
        self._pending: list[Job] = []  # queued or in flight, in order
        self._closed = threading.Event()  # ends back-off sleeps: no attempt after close
        self._counts = OutboxCounts()
        #: how many attempts each delivery made, in the order they ended
        self.attempts: list[int] = []

    def put(self, job: Job) -> None:
        """Queue ``job`` behind the earlier jobs of its receiver (``job.lane``)."""
        with self._cond:
            if self._closed.is_set():
                return
            self._pending.append(job)
            lane = self._lanes.get(job.lane)
            if lane is None:
                lane = self._lanes[job.lane] = queue.Queue()
                threading.Thread(target=self._work, args=(lane,), daemon=True,
                                 name=f"rotate-notify-{len(self._lanes)}").start()
        lane.put((job, self._clock() + self._budget))

    def close(self, deadline: float) -> OutboxCounts:
        """Wait until every queued delivery ended or ``deadline`` (monotonic); count them —
        one still pending then counts as failed, once (a late success changes nothing)."""
        with self._cond:
            self._cond.wait_for(lambda: not self._pending,
                                timeout=max(0.0, deadline - self._clock()))
            self._closed.set()
            late = [f"{job.what}: not delivered by the deadline" for job in self._pending]
            counts = OutboxCounts(self._counts.delivered, self._counts.failed + len(late),
                                  [*self._counts.failures, *late])
            lanes = list(self._lanes.values())
        for lane in lanes:
            lane.put(None)
        return counts

    def _work(self, lane: queue.Queue[tuple[Job, float] | None]) -> None:
        while True:
            item = lane.get()
            if item is None:
                return
            job, until = item
            failure = None if self._closed.is_set() else self._deliver(job, until)
            with self._cond:
                if self._closed.is_set():
                    continue  # already counted by close()
                self._pending.remove(job)
                if failure is None:
                    self._counts.delivered += 1
                else:
                    self._counts.failed += 1
                    self._counts.failures.append(failure)
                self._cond.notify_all()

    def _deliver(self, job: Job, until: float) -> str | None:
        """None once delivered, else why not."""
        d = self._delivery
        backoff = d.first_backoff
        reason = "no attempt within its time"
        made = 0
        try:
            while made < d.attempts and not self._closed.is_set():
                left = until - self._clock()
                if left <= 0:
                    break
                made += 1
                try:
                    job.send(min(d.request_timeout, left))
                    return None
                except PermanentError as exc:
                    return f"{job.what}: {exc.message}"
                except ClientError as exc:
                    reason = exc.message
                except Exception as exc:  # our bug: its type only, the text could hold anything
                    return f"{job.what}: internal error ({type(exc).__name__})"
                if made < d.attempts:
                    pause = min(backoff, d.max_backoff, max(0.0, until - self._clock()))
                    self._closed.wait(pause)
                    backoff *= 2
            return f"{job.what}: {reason} (after {made} attempt(s))"
        finally:
            self.attempts.append(made)
