"""The tests' one polling helper, built on the product's one waiting primitive
(:func:`rotate.core.waiting.wait_for`): a condition, a deadline, a back-off.

Tests never sleep to synchronise.  :func:`eventually` waits for a condition to hold;
:func:`holds` watches a condition stay true for an observation window (the only way to show
that something does NOT happen).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from rotate.core.waiting import Backoff, Deadline, WaitTimeout, wait_for

T = TypeVar("T")
#: fast first checks (the lab reacts in milliseconds), then at most twice a second
_BACKOFF = Backoff(initial=0.02, factor=1.5, maximum=0.5)


def eventually(check: Callable[[], T | None], timeout: float, what: str, *,
               ignoring: tuple[type[BaseException], ...] = (Exception,)) -> T:
    """Call ``check`` until it returns something other than None or False; return that.

    An exception of a type in ``ignoring`` counts as "not yet" and is shown if the deadline
    passes; the test then fails with an AssertionError naming ``what``.
    """
    last: list[BaseException | None] = [None]

    def attempt() -> T | None:
        try:
            value = check()
        except ignoring as exc:
            last[0] = exc
            return None
        return None if value is None or value is False else value

    try:
        return wait_for(attempt, deadline=Deadline.after(timeout), what=what,
                        backoff=Backoff(_BACKOFF.initial, _BACKOFF.factor, _BACKOFF.maximum))
    except WaitTimeout:
        raise AssertionError(
            f"timed out after {timeout}s waiting for {what}; last error: {last[0]!r}") from None


def holds(check: Callable[[], object], seconds: float, what: str) -> None:
    """``check`` stays true for ``seconds`` (an observation window, not a synchronisation)."""

    def still_true() -> None:
        assert check(), what

    try:
        wait_for(still_true, deadline=Deadline.after(seconds), what=what,
                 backoff=Backoff(0.02, 1.5, 0.1))
    except WaitTimeout:
        return
