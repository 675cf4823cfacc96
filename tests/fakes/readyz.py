"""A fake of the Readyz seam: a callable says what each target answers."""

from __future__ import annotations

from collections.abc import Callable

from rotate.clients.seams import (
    ReadyzTarget,
)


class FakeReadyz:
    def __init__(self, answer: Callable[[ReadyzTarget], int]) -> None:
        self.answer = answer
        self.calls: list[str] = []

    def status(self, target: ReadyzTarget) -> int:
        self.calls.append(str(target))
        return self.answer(target)


# --------------------------------------------------------------------------- the shop


class FakeMetrics:
    """A fake of the Metrics seam: ``values`` answers each expression (a list: one answer per
    query, the last one repeated; an exception instance is raised)."""

    def __init__(self) -> None:
        self.values: dict[str, list[float | Exception | None]] = {}
        self.calls: list[tuple[str, str]] = []

    def value(self, url: str, expr: str) -> float | None:
        self.calls.append((url, expr))
        answers = self.values.get(expr) or [None]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer
