"""What a wait saw last, and where it goes: the progress a person watches on a long step.

A wait (:func:`rotate.core.waiting.wait_for`) reports each new :class:`Observation` to the
sink bound for the step running in this thread (:func:`observed_by`).  The engine's executor
binds one per step that forwards to its Observer (``step_observed``), which the CLI shows:
``2/3 pods ready`` beside a running step, and in the heartbeat lines of piped output.  The
waiting code needs no parameter for it and never learns who listens; with no sink bound
(preflight, tests, library use) a report costs one lookup.

Invariants:

- An observation holds names, counts and states that the waiting code read — a rollout's
  replica counts, an ExternalSecret's condition, an HTTP status, a message the product wrote
  — never a value: its fields are ``str`` and ``int``, and a
  :class:`~rotate.core.secret.Secret` is neither (the constructor refuses one anyway).
- ``detail`` is the full sentence a timeout quotes (``WaitTimeout.last``), unchanged from
  before observations existed; ``done``/``total``/``unit`` say the same as a count when there
  is one, for a compact ``2/3 pods ready``.
- The sink is a :class:`~contextvars.ContextVar`: each step runs in one thread, and a step
  running beside another (parallel consumers) has its own binding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass

from rotate.core.secret import Secret


@dataclass(frozen=True)
class Observation:
    """The last thing a wait saw (see module doc)."""

    detail: str
    done: int | None = None
    total: int | None = None
    unit: str = ""

    def __post_init__(self) -> None:
        if any(isinstance(v, Secret) for v in (self.detail, self.unit)):
            raise TypeError("an Observation never holds a Secret")

    @property
    def short(self) -> str:
        """``2/3 pods ready`` when it is a count, else the detail."""
        if self.done is not None and self.total is not None and self.unit:
            return f"{self.done}/{self.total} {self.unit}"
        return self.detail

    def __str__(self) -> str:
        return self.detail


Sink = Callable[[Observation], None]

_sink: ContextVar[Sink | None] = ContextVar("rotate_observation_sink", default=None)


@contextmanager
def observed_by(sink: Sink) -> Iterator[None]:
    """Send the observations of the waits in this block (this thread) to ``sink``."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def report(observation: Observation) -> None:
    """Hand ``observation`` to the bound sink, if any.  A sink's failure is its own: progress
    display must never fail a wait."""
    sink = _sink.get()
    if sink is None:
        return
    with suppress(Exception):  # display only: the wait goes on
        sink(observation)
