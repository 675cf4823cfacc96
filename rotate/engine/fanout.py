"""Independent reads for many consumers (or permissions), on a bounded pool, results in
input order.

Preflight makes about six requests per consumer (its Deployment, its document's version, the
Config Center write probe, its tokens, the harvest's reads).  One after the other they would
make start-up grow by seconds at 100 consumers.  The requests of different consumers are
independent, and the adapters are safe to share between threads (the executor already runs
steps in parallel on them), so they run on at most :data:`FAN_OUT` threads.  The permission
check's access reviews (~30 for one credential) go the same way.

Invariant: :func:`fan_out` returns one result per input, in input order, whatever order the
threads finish in — output and journal stay deterministic.  An exception raised by ``fn``
propagates (checks catch their own ``ClientError``; anything else is a bug).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

A = TypeVar("A")
T = TypeVar("T")

#: Enough to hide request latency, few enough not to flood a small API server.
FAN_OUT = 8


def fan_out(items: Sequence[A], fn: Callable[[A], T], *, workers: int = FAN_OUT,
            name: str = "rotate-preflight") -> list[T]:
    """``[fn(x) for x in items]``, run on up to ``workers`` threads (:data:`FAN_OUT`)."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)),
                            thread_name_prefix=name) as pool:
        return list(pool.map(fn, items))
