"""Preflight's fan-out: per-consumer reads overlap, results keep the chain's order."""

from __future__ import annotations

import threading
import time

from rotate.engine.fanout import FAN_OUT, fan_out


def test_fan_out_runs_items_concurrently_and_returns_them_in_input_order() -> None:
    # Two items meet at a barrier: run one after the other, the first would wait alone and
    # the barrier would break (BrokenBarrierError) instead of returning.
    barrier = threading.Barrier(2, timeout=5.0)

    def fn(item: str) -> str:
        if item in ("a", "b"):
            barrier.wait()
        return item.upper()

    assert fan_out(["a", "b", "c", "d"], fn) == ["A", "B", "C", "D"]


def test_fan_out_is_bounded() -> None:
    running, peak = [0], [0]
    lock = threading.Lock()

    def fn(item: str) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline:  # hold the slot briefly (busy, not a sleep)
            pass
        with lock:
            running[0] -= 1
        return item

    items = [str(i) for i in range(3 * FAN_OUT)]
    assert fan_out(items, fn) == items
    assert 1 < peak[0] <= FAN_OUT
