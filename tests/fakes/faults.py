"""Armed failures for the fakes: the next call(s) of a method raise."""

from __future__ import annotations

from typing import Any


class Faults:
    """``faults.arm("write", exc, times=1)`` makes the next call of that method raise."""

    def __init__(self) -> None:
        self._armed: dict[str, list[Any]] = {}
        self.calls: dict[str, int] = {}

    def arm(self, op: str, exc: BaseException, times: int = 1, skip: int = 0) -> None:
        """Raise ``exc`` on the next ``times`` calls of ``op`` after ``skip`` calls pass."""
        self._armed[op] = [exc, times, skip]

    def clear(self) -> None:
        self._armed.clear()

    def hit(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        armed = self._armed.get(op)
        if armed and armed[1] != 0:
            if armed[2] > 0:
                armed[2] -= 1
                return
            armed[1] -= 1
            raise armed[0]
