"""What keeping the journal in the cluster costs a rotation: wall time and API requests.

One lab (fast profile) in its own directory, started and stopped here.  ``rotate dragonfly
--confirm`` runs alternately with ``ROTATE_CLUSTER_JOURNAL=off`` (the state directory only)
and on (the default: the state directory, then the cluster behind it), ``--runs`` times
each; the table shows each mode's median wall and the ConfigMap requests rotate made per
run (counted by the lab's API server).  The journal's hot path is local (an fsync per
record); the cluster copy is written behind it by a thread, so the walls should not differ
beyond the runs' own spread (docs/performance.md "The journal in the cluster").

    .venv/bin/python -m bench.journal_overhead [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.overhead import api_counts, difference
from bench.world import BenchError, Lab, tool

MODES = ("off", "on")


def one_run(lab: Lab, mode: str) -> tuple[float, int]:
    """(wall seconds, ConfigMap requests) of one rotation in ``mode``."""
    env = {**lab.env, "ROTATE_CLUSTER_JOURNAL": mode}
    before = api_counts(lab)
    began = time.monotonic()
    done = subprocess.run([tool("rotate"), "dragonfly", "--confirm"], env=env, cwd=lab.dir,
                          capture_output=True, text=True, timeout=600, check=False)
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise BenchError(f"rotate dragonfly --confirm ({mode}) exited {done.returncode}:\n"
                         + done.stderr[-2000:])
    requests = difference(before, api_counts(lab))
    return wall, sum(n for key, n in requests.items() if key.endswith(" configmaps"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.journal_overhead",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="rotations per mode (default 3)")
    args = ap.parse_args(argv)
    lab = Lab(Path(tempfile.mkdtemp(prefix="rotate-journal-bench-")))
    lab.dir.chmod(0o755)  # the lab's PostgreSQL runs as its own user and must reach its data
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    requests: dict[str, list[int]] = {m: [] for m in MODES}
    try:
        lab.up("fast", None)
        for _ in range(args.runs):
            for mode in MODES:  # alternated: a drift of the machine hits both alike
                wall, n = one_run(lab, mode)
                walls[mode].append(wall)
                requests[mode].append(n)
    except BenchError as exc:
        print(f"bench.journal_overhead: {exc}", file=sys.stderr)
        return 2
    finally:
        lab.down()
    print("| cluster journal | runs | median wall (s) | walls (s) | ConfigMap requests / run |")
    print("|---|---|---|---|---|")
    for mode in MODES:
        print(f"| {mode} | {len(walls[mode])} | {statistics.median(walls[mode]):.1f} | "
              f"{', '.join(f'{w:.1f}' for w in walls[mode])} | "
              f"{statistics.median(requests[mode]):.0f} |")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    sys.exit(main())
