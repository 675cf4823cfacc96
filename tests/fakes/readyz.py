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
