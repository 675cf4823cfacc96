"""The start-up floor beside each rotate run: a Python that only imports the libraries rotate
is built on, timed under the same load, right after the run.

rotate's own time at start-up (start-up+plan, before its first journal record) is mostly
the import of its chosen libraries — typer and rich for the CLI, the kubernetes client,
hvac, httpx, the Redis driver, jsonschema and ruamel.yaml — and on a saturated 2-core lab
the process waits for a core more than it computes.  This command is what any tool built
on those libraries pays before it does anything; measured in the same run, under the same
load, it says how much of rotate's start-up is rotate's and how much is the floor.

Invariant: the load runs ``LEAD`` seconds before the command and stops right after it, as
around a rotate run (bench.measure); the command's failure is a BenchError, not a figure.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.load import Load
from bench.measure import LEAD, run_command
from bench.startup import venv_python
from bench.world import BenchError, Target

#: the libraries a rotation of the example chain's ``dragonfly`` imports (its adapters' and
#: the CLI's); ``client.ApiClient`` loads the kubernetes client's lazy ``api_client``
IMPORTS = ("import typer, rich.console, hvac, httpx, redis, jsonschema, ruamel.yaml; "
           "from kubernetes import client, config; client.ApiClient")


@dataclass(frozen=True)
class Floor:
    wall: float
    cpu: float


def measure_floor(targets: Sequence[Target], rps: float, timeout: float = 60.0) -> Floor:
    load = Load(targets, rps, LEAD + timeout + 5).start()
    try:
        time.sleep(LEAD)  # the same lead-in as before a measured command
        started = time.time()
        code, cpu = run_command([venv_python(), "-c", IMPORTS], dict(os.environ),
                                subprocess.DEVNULL, timeout)
        wall = time.time() - started
    finally:
        load.stop()
    if code != 0:
        raise BenchError(f"the start-up floor command ({venv_python()} -c '{IMPORTS}') "
                         f"exited {code}")
    return Floor(wall, cpu)


def render(floors: Sequence[Floor], startups: Sequence[float]) -> str:
    """One line: the floor's median wall and CPU, and rotate's start-up beside it."""
    if not floors:
        return ""
    walls = [f.wall for f in floors]
    line = (f"start-up floor (a Python importing rotate's libraries only, same load, after "
            f"each rotate run): wall {statistics.median(walls):.2f} s ("
            + " / ".join(f"{w:.2f}" for w in walls)
            + f"), CPU {statistics.median(f.cpu for f in floors):.2f} s")
    if startups:
        line += (f"; rotate's start-up+plan {statistics.median(startups):.2f} s = "
                 f"{statistics.median(startups) / statistics.median(walls):.2f} × the floor")
    return line


#: the bar for rotate's wall, as a multiple of the chain's critical path
#: (docs/performance.md "Targets")
BAR = 1.2


def render_headroom(floors: Sequence[Floor], critical_paths: Sequence[float | None]) -> str:
    """One line: what the bar leaves for rotate's own work once the floor is paid, per run.

    Run *i*'s floor was measured right after rotate's run *i*, under the same load, so the
    two pair up.  A rotate whose only cost beyond the world were its imports would take
    ``cp + floor``; the bar allows ``BAR × cp``; the difference is all that is left for
    Python's own start beyond them, parsing, the Lease, preflight, the writes and the exit —
    negative when the imports alone exceed the bar."""
    pairs = [(f.wall, cp) for f, cp in zip(floors, critical_paths, strict=False)
             if cp is not None and cp > 0]
    if not pairs:
        return ""
    ratios = " / ".join(f"{(cp + w) / cp:.2f}" for w, cp in pairs)
    left = " / ".join(f"{(BAR - 1) * cp - w:+.2f}" for w, cp in pairs)
    return (f"the floor alone, added to each run's critical path: {ratios} × it; what "
            f"{BAR:g} × leaves for rotate's own work beyond its imports: {left} s")
