"""The plain ``rotate CRED --confirm`` under steady load: how many requests fail.

For credentials :mod:`bench.rotation` has no runbook twin for — a provider that is not one
Deployment (``mariadb``: a StatefulSet changed by a plug-in), consumers that read the Secret
themselves — and to prove the claim of the default strategy: where every provider holds two
values, the command without ``--strategy`` is the overlap and fails no request.

What one invocation does: ``rotate lab up --profile realistic --nice N`` (``--with`` parts
as asked; stopped again at the end) or a running lab (``--no-lab-up --dir``); then per run,
once every pod is Ready and none terminating: open-loop load (:class:`bench.load.Load`) on
``/work`` of every Service of the namespaces that serve it (``shop``, ``reports`` and, when
present, ``mariadb``) from 1.5 s before the command until 2 s after it, then the command
as an operator types it — no ``--strategy`` (``-o json`` only to read the strategy rotate
picked).  It prints each run's exit code, wall time and failed requests per service, and
writes ``OUT/live-load.json``.  Exit 1 when a run fails or a request does.

    .venv/bin/python -m bench.live_load --credential dragonfly --runs 3
    .venv/bin/python -m bench.live_load --credential mariadb --with mariadb --runs 3
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.load import Load
from bench.rotation import LAB_NICE, _sigterm, wait_steady
from bench.world import BENCH_DIR, BenchError, Lab, Target, load_targets, tool

NAMESPACES = ("shop", "reports", "mariadb")
BEFORE, AFTER = 1.5, 2.0


def targets_of(lab: Lab) -> list[Target]:
    """Every Service with an http port in the namespaces present (the readers' included)."""
    found: list[Target] = []
    for ns in NAMESPACES:
        try:
            found += [t for t in load_targets(lab, ns) if t.port != 3306]
        except BenchError:
            continue  # the namespace is not in this lab (mariadb without --with)
    return found


def one_run(lab: Lab, credential: str, targets: list[Target], rps: float,
            timeout: float) -> dict[str, object]:
    load = Load(targets, rps, max_seconds=timeout + BEFORE + AFTER + 10).start()
    time.sleep(BEFORE)  # the baseline: load before the command, as bench.rotation has it
    began, began_wall = time.monotonic(), time.time()
    # -o json only to read the strategy rotate picked from its report
    done = subprocess.run([tool("rotate"), credential, "--confirm", "-o", "json"], env=lab.env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.monotonic() - began
    time.sleep(AFTER)
    samples = load.stop()
    failed: dict[str, int] = {}
    window: dict[str, list[float]] = {}  # first and last failure, s after the command began
    for s in samples:
        if not s.ok:
            failed[s.service] = failed.get(s.service, 0) + 1
            at = round(s.sent - began_wall, 2)
            window.setdefault(s.service, [at, at])[1] = at
    try:
        strategy = str(json.loads(done.stdout).get("strategy", ""))
    except ValueError:
        strategy = "no report"
    return {"exit": done.returncode, "wall": round(wall, 2), "requests": len(samples),
            "failed": sum(failed.values()), "failed_by_service": failed,
            "failure_windows": window,
            "strategy": strategy, "tail": done.stderr.strip()[-600:] if done.returncode else ""}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live_load",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--credential", default="dragonfly")
    ap.add_argument("--with", dest="extras", action="append", default=[],
                    choices=("mariadb", "bugsink"), help="an optional part of the lab")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rps", type=float, default=20.0, help="per service (default 20)")
    ap.add_argument("--lab-nice", type=int, default=LAB_NICE, metavar="N",
                    help=f"the lab's niceness (default {LAB_NICE}, as bench.rotation)")
    ap.add_argument("--command-timeout", type=float, default=300.0)
    ap.add_argument("--no-lab-up", action="store_true")
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if not 1 <= args.runs <= 20 or not 0.5 <= args.rps <= 100 or not 0 <= args.lab_nice <= 19:
        ap.error("--runs is 1-20, --rps 0.5-100 and --lab-nice 0-19")
    signal.signal(signal.SIGTERM, _sigterm)  # `timeout`/kill: still stop the lab we started
    out: Path = (args.out or BENCH_DIR / "results" /
                 datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    lab = Lab((args.dir or out / "lab").resolve())
    runs: list[dict[str, object]] = []
    try:
        if args.no_lab_up:
            lab.borrow()
        else:
            print(f"lab up (realistic, nice {args.lab_nice}) in {lab.dir} …", file=sys.stderr)
            lab.up("realistic", None, args.lab_nice, tuple(args.extras))
        targets = targets_of(lab)
        for i in range(args.runs):
            wait_steady(lab)
            run = one_run(lab, args.credential, targets, args.rps, args.command_timeout)
            runs.append(run)
            print(f"run {i + 1}/{args.runs}: rotate {args.credential} --confirm → exit "
                  f"{run['exit']} ({run['strategy']}), wall {run['wall']} s, "
                  f"{run['failed']} failed of {run['requests']} requests "
                  f"{run['failed_by_service'] or ''} windows {run['failure_windows'] or ''}"
                  f"{run['tail']}", flush=True)
    except BenchError as exc:
        print(f"bench.live_load: {exc}", file=sys.stderr)
        return 2
    finally:
        lab.down()
    (out / "live-load.json").write_text(json.dumps(
        {"credential": args.credential, "rps": args.rps, "services": [t.name for t in targets],
         "runs": runs}, indent=2) + "\n")
    print(f"{args.credential}: {sum(int(str(r['failed'])) for r in runs)} failed requests in "
          f"{len(runs)} run(s) at {args.rps:g} req/s on {len(targets)} services; "
          f"{out / 'live-load.json'}")
    return 0 if all(r["exit"] == 0 and r["failed"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
