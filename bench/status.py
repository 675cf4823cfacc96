"""``rotate status`` at N consumers on the lab: the whole command's wall time, against 2 s.

``python -m bench.status --services 100`` starts a lab with 100 consumers of ``dragonfly``
(``rotate lab up --services 100``), rotates it once (so that every link has a run behind it:
documents written, pods restarted, old tokens revoked), then runs ``rotate status dragonfly
-o json`` ``--runs`` times and prints each wall time (process start to exit, start-up
included), the checks' own time (the document's ``seconds``) and the median.  Every run must
exit 0 (the chain closed): a broken link would be measured on a shorter path.  Each status
is followed by a plan (``rotate dragonfly -o json``, whose preflight reads about as much), the
yardstick of how busy the machine was: the figure to compare across machines is the ratio.
The lab it started is stopped at the end; ``--no-lab-up --dir D`` uses a running one instead
(no rotation then: its chain must already be closed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.world import BENCH_DIR, BenchError, Lab, tool

#: the target (docs/performance.md)
BAR_SECONDS = 2.0


def _within(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range [{lo}, {hi}]")
        return value
    return parse


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench.status", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--services", type=_within(3, 100), default=100,
                    help="consumers, 3-100 (default 100)")
    ap.add_argument("--runs", type=_within(1, 100), default=5,
                    help="status commands timed (default 5)")
    ap.add_argument("--profile", default="fast", choices=("fast", "realistic"))
    ap.add_argument("--lab-nice", type=_within(0, 19), default=19,
                    help="the lab's niceness (default 19)")
    ap.add_argument("--dir", type=Path, help="the lab directory")
    ap.add_argument("--no-lab-up", action="store_true", help="use the lab running in --dir")
    return ap


def _rotate(lab: Lab, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("rotate"), *args], env=lab.env, capture_output=True, text=True,
                          timeout=timeout, check=False, cwd=lab.dir)


def timed_status(lab: Lab) -> tuple[float, float]:
    """One ``rotate status dragonfly -o json``: (wall seconds, the checks' seconds)."""
    began = time.perf_counter()
    done = _rotate(lab, "status", "dragonfly", "-o", "json", timeout=300)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise BenchError(f"rotate status exited {done.returncode} (the chain is not closed?):\n"
                         + done.stderr.strip()[-2000:])
    doc = json.loads(done.stdout)
    return wall, float(doc["credentials"][0]["seconds"])


def timed_plan(lab: Lab) -> float:
    """One plan, ``rotate dragonfly -o json`` (preflight reads about as much: every
    consumer's workload, document, tokens and readyz Service), as the yardstick of the
    machine's state at the time: a busy machine slows both alike."""
    began = time.perf_counter()
    done = _rotate(lab, "dragonfly", "-o", "json", timeout=300)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise BenchError(f"the plan exited {done.returncode}:\n" + done.stderr.strip()[-2000:])
    return wall


def run(args: argparse.Namespace) -> int:
    lab = Lab((args.dir or BENCH_DIR / "results" / "status-lab").resolve())
    try:
        if args.no_lab_up:
            lab.borrow()
        else:
            print(f"lab up ({args.profile}, {args.services} consumers) in {lab.dir} …",
                  file=sys.stderr)
            lab.up(args.profile, args.services, args.lab_nice)
            print("rotate dragonfly --confirm …", file=sys.stderr)
            done = _rotate(lab, "dragonfly", "--confirm", "--timeout", "10m", timeout=1800)
            if done.returncode != 0:
                raise BenchError(f"the rotation exited {done.returncode}:\n"
                                 + done.stderr.strip()[-2000:])
        timed_status(lab)  # warm: the validated-chain cache, the page cache
        runs, plans = [], []
        for i in range(1, args.runs + 1):  # interleaved: the machine's drift hits both
            runs.append(timed_status(lab))
            plans.append(timed_plan(lab))
            wall, checks = runs[-1]
            print(f"run {i}: status wall {wall:.2f} s (checks {checks:.2f} s); "
                  f"plan {plans[-1]:.2f} s")
        median = statistics.median(w for w, _ in runs)
        plan = statistics.median(plans)
        verdict = "met" if median <= BAR_SECONDS else "NOT met"
        print(f"rotate status dragonfly at {args.services} consumers: median wall "
              f"{median:.2f} s, checks {statistics.median(c for _, c in runs):.2f} s "
              f"(bar {BAR_SECONDS:g} s: {verdict}); the plan beside it {plan:.2f} s "
              f"(status ÷ plan {median / plan:.2f})")
        return 0 if median <= BAR_SECONDS else 1
    finally:
        if lab.down():
            print(f"lab down: {lab.dir}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        return run(parser().parse_args(argv))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
