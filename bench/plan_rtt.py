"""The plan's latency against a slow API: preflight's parts at once against one after the other.

``python -m bench.plan_rtt --rtt 20`` plans ``dragonfly`` on the unit tests' fake world
(3 consumers) with every adapter call delayed by RTT milliseconds — what a real API server,
OpenBao or Config Center a few network hops away costs — once with preflight's parts on one
thread (``PART_THREADS = 1``) and once on their own threads (rotate.engine.preflight),
and prints the median of each.  The lab cannot show this: on loopback a round trip is well
under a millisecond and the plan's time is its CPU.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import rotate.engine.preflight as preflight
from tests.fakes import World
from tests.fakes.world import make_chain
from tests.support.engine import options


def _delayed(obj: object, rtt: float) -> None:
    """Every public method of ``obj`` sleeps ``rtt`` seconds first (a round trip)."""
    for name, fn in inspect.getmembers(obj, inspect.ismethod):
        if not name.startswith("_"):
            def slow(*args: Any, _fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
                time.sleep(rtt)
                return _fn(*args, **kwargs)
            setattr(obj, name, slow)


@contextmanager
def _parts_on(threads: int) -> Iterator[None]:
    before = preflight.PART_THREADS
    preflight.PART_THREADS = threads
    try:
        yield
    finally:
        preflight.PART_THREADS = before


def plan_seconds(rtt: float, workers: int) -> float:
    with tempfile.TemporaryDirectory() as d, _parts_on(workers):
        tmp = Path(d)
        world = World(chain=make_chain(tmp))
        world.setup()
        for adapter in (world.vault, world.kube, world.cc):
            _delayed(adapter, rtt)
        started = time.perf_counter()
        plan = world.engine().plan(options(tmp), "dragonfly")
        seconds = time.perf_counter() - started
    if not plan.ok:
        raise SystemExit("error: the fake world's plan failed; the figure would mean nothing")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.plan_rtt",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rtt", type=float, default=20.0, help="milliseconds per adapter call "
                    "(default 20)")
    ap.add_argument("--runs", type=int, default=5, help="plans per side (default 5)")
    args = ap.parse_args(argv)
    if not 0 <= args.rtt <= 1000 or not 1 <= args.runs <= 50:
        ap.error("--rtt must be 0-1000 and --runs 1-50")
    for label, workers in (("one after the other", 1), ("at once", 5)):
        times = [plan_seconds(args.rtt / 1000, workers) for _ in range(args.runs)]
        print(f"RTT {args.rtt:g} ms, preflight's parts {label}: plan "
              f"{statistics.median(times):.2f} s (median of {args.runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
