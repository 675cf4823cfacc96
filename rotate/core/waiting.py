"""The one way `rotate` waits: a condition, a deadline, a back-off, a cancel token.

Every wait in the product — for ESO to sync, for a rollout, for a readyz, for a Lease — goes
through :func:`wait_for`.  There are no bare ``sleep`` loops anywhere else, so deadlines,
interruption (SIGINT/SIGTERM) and the temporary-vs-permanent error rule behave the same
everywhere.

``check`` returns ``None`` while the condition does not hold, or the value that proves it.
Between checks the waiter calls ``pause(seconds)``; the default sleeps on the cancel token's
event (so SIGINT wakes it at once).  A caller that has a Kubernetes watch passes a ``pause``
that returns as soon as the next watch event arrives, so waiting on a rollout reacts to
events instead of polling, while the back-off still bounds how often ``check`` runs when a
watch is chatty or broken.

A :class:`~rotate.core.errors.TemporaryError` raised by ``check`` counts as "not yet"
(and is remembered as the last observation; its ``delay``, when given, is the next pause);
any other exception — a PermanentError, WaitTimeout included, or a bug — ends the wait at once.

Each new last observation (``describe``'s, or a TemporaryError's message) is also reported
to the step's progress (:mod:`rotate.core.observation`): ``describe`` may return an
:class:`~rotate.core.observation.Observation` (a count such as ``2/3 pods ready``) or a plain
sentence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from rotate.core import observation
from rotate.core.errors import Interrupted, PermanentError, TemporaryError
from rotate.core.observation import Observation

T = TypeVar("T")


class CancelToken:
    """Set by the signal handler; every wait and step boundary checks it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "interrupted") -> None:
        self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Interrupted(self.reason or "interrupted")

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``; return early (and raise) if cancelled."""
        if self._event.wait(max(0.0, seconds)):
            raise Interrupted(self.reason or "interrupted")


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic() value

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())


class WaitTimeout(PermanentError):
    """The condition did not hold before the deadline. ``last`` describes the last observation.

    Permanent: the deadline is used up, so a caller retrying inside its own ``wait_for``
    (the executor retries a step after a TemporaryError) lets it through at once."""

    def __init__(self, what: str, last: str) -> None:
        super().__init__("wait", what, f"timed out; last seen: {last}" if last else "timed out")
        self.what = what
        self.last = last


@dataclass
class Backoff:
    initial: float = 0.05
    factor: float = 1.6
    maximum: float = 2.0
    _next: float = field(default=0.0, init=False)

    def next(self) -> float:
        self._next = (
            self.initial if self._next == 0 else min(self.maximum, self._next * self.factor)
        )
        return self._next


def wait_for(
    check: Callable[[], T | None],
    *,
    deadline: Deadline,
    what: str,
    describe: Callable[[], str | Observation] | None = None,
    cancel: CancelToken | None = None,
    pause: Callable[[float], None] | None = None,
    backoff: Backoff | None = None,
) -> T:
    """Call ``check`` until it returns a value other than None, or raise WaitTimeout.

    ``describe`` (optional) says what was last observed, for the timeout message and the
    step's progress.
    """
    token = cancel or CancelToken()
    bo = backoff or Backoff()
    last = ""
    reported: Observation | None = None
    while True:
        token.check()
        delay: float | None = None
        seen: str | Observation | None = None
        try:
            result = check()
        except TemporaryError as exc:
            result = None
            seen = exc.message
            delay = exc.delay
        else:
            if result is not None:
                return result
            if describe is not None:
                seen = describe()
        if seen is not None:
            now = seen if isinstance(seen, Observation) else Observation(seen)
            last = now.detail
            if now != reported:
                reported = now
                observation.report(now)
        remaining = deadline.remaining()
        if remaining <= 0:
            raise WaitTimeout(what, last)
        interval = min(delay if delay is not None else bo.next(), remaining)
        if pause is not None:
            token.check()
            pause(interval)
        else:
            token.sleep(interval)
