"""Several credentials in one run against each one rotated alone, under load.

One run brings up the lab (realistic profile, at nice 19 like bench.rotation) in its own
directory, puts steady load on every shop service's /work through its ClusterIP, and
measures, round after round in alternating order from a settled lab:
``rotate dragonfly --confirm``, ``rotate postgres --confirm`` and
``rotate dragonfly postgres --confirm``.  Per run: wall time, failed requests, and each
consumer's rollouts (its Deployment's revision before and after).  It prints one table and
the verdict against the target (docs/performance.md "Several credentials"), writes
OUT/results.json, and stops the lab it started — also on error and Ctrl-C.

    .venv/bin/python -m bench.several [--runs 2] [--rps 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import chain_params
from bench.measure import COMMAND_TIMEOUT, journal_steps, measure
from bench.rotation import LAB_NICE, _bounded, _sigterm, wait_steady
from bench.world import BENCH_DIR, BenchError, Lab, Target, load_targets, tool

#: what each kind of run rotates
KINDS: dict[str, tuple[str, ...]] = {
    "dragonfly": ("dragonfly",), "postgres": ("postgres",), "both": ("dragonfly", "postgres")}
#: the consumers of both credentials in the lab's chain file
SHARED = ("order", "user")
#: the target: one run of both at most this times the slower one alone (medians)
WALL_RATIO = 1.3


@dataclass(frozen=True)
class Result:
    kind: str
    index: int
    wall: float
    exit_code: int
    failed: int
    rollouts: dict[str, int]  # consumer → rollouts during the run
    failed_by: dict[str, int]  # service → its failed requests


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench.several",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=_bounded(1, 10, int), default=2,
                    help="rounds of the three kinds, alternating their order (default 2)")
    ap.add_argument("--rps", type=_bounded(0.5, 100, float), default=20.0,
                    help="requests per second on each service's /work (default 20)")
    ap.add_argument("--lab-nice", type=_bounded(0, 19, int), default=LAB_NICE, metavar="N",
                    help=f"niceness of the lab this run starts (default {LAB_NICE}, as "
                    "bench.rotation; 0 on a machine too busy for a lab at 19 to start)")
    ap.add_argument("--out", type=Path, help="results directory (default "
                    "bench/results/several-<UTC time>)")
    ap.add_argument("--dir", type=Path, help="lab directory (default OUT/lab)")
    ap.add_argument("--no-lab-up", action="store_true", help="use the lab already running "
                    "in --dir; do not start or stop it")
    return ap


def wait_rolled(lab: Lab, deadline_s: float = 180.0) -> None:
    """Every Deployment of the shop rolled out (its status observed its generation and every
    replica updated and available): what preflight's ``consumer.healthy`` asks.  Pods
    Ready (bench.rotation.wait_steady) is not enough on a busy machine, where a Deployment's
    status lags its pods."""
    deadline = time.time() + deadline_s
    while True:
        items = lab.kubectl_json("get", "deployments", "-n", "shop")["items"]

        def done(d: dict[str, Any]) -> bool:
            st, want = d.get("status") or {}, (d.get("spec") or {}).get("replicas", 1)
            return bool(st.get("observedGeneration") == d["metadata"].get("generation")
                        and st.get("updatedReplicas") == want
                        and st.get("availableReplicas") == want)

        if items and all(done(d) for d in items):
            return
        if time.time() > deadline:
            raise BenchError(f"the shop's Deployments did not roll out within {deadline_s:.0f}s")
        time.sleep(0.5)


def revisions(lab: Lab, names: list[str]) -> dict[str, int]:
    """Each consumer Deployment's revision (one more per rollout)."""
    out = {}
    for name in names:
        obj = lab.kubectl_json("get", "deployment", "-n", "shop", name)
        out[name] = int(obj["metadata"]["annotations"]["deployment.kubernetes.io/revision"])
    return out


def one_run(kind: str, i: int, args: argparse.Namespace, lab: Lab, targets: list[Target],
            params: chain_params.ChainParams, out: Path, consumers: list[str]) -> Result:
    state = out / "state" / f"{kind}-{i}"
    state.mkdir(parents=True, exist_ok=True)
    env = {**lab.env, "ROTATE_STATE_DIR": str(state)}
    argv = [tool("rotate"), *KINDS[kind], "--confirm", "--state-dir", str(state)]
    before = revisions(lab, consumers)
    seg = measure(kind, i, argv, env, lab, targets, params, args.rps,
                  out / "logs" / f"{kind}-{i}.log",
                  lambda started, ended: journal_steps(state, started, ended),
                  COMMAND_TIMEOUT)
    after = revisions(lab, consumers)
    failed_by: dict[str, int] = {}
    for sample in seg.samples:
        if not sample.ok:
            failed_by[sample.service] = failed_by.get(sample.service, 0) + 1
    return Result(kind, i, seg.wall, seg.exit_code, sum(failed_by.values()),
                  {c: after[c] - before[c] for c in consumers}, failed_by)


def verdict(results: list[Result]) -> tuple[list[str], bool]:
    """The summary lines and whether the target holds (docs/performance.md)."""
    med = {k: statistics.median(r.wall for r in results if r.kind == k) for k in KINDS}
    failed = {k: statistics.median(r.failed for r in results if r.kind == k) for k in KINDS}
    lines = [f"{'kind':<10} {'wall (median)':>13}  walls        failed (median)  failed"]
    for k in KINDS:
        mine = [r for r in results if r.kind == k]
        lines.append(f"{k:<10} {med[k]:>12.1f}s  "
                     + " / ".join(f"{r.wall:.1f}" for r in mine).ljust(12)
                     + f" {failed[k]:>15g}  " + " / ".join(str(r.failed) for r in mine))
    slower = max(med["dragonfly"], med["postgres"])
    worst_alone = max(failed["dragonfly"], failed["postgres"])
    once = all(r.rollouts[c] == 1 for r in results if r.kind == "both" for c in SHARED)
    ratio = med["both"] / slower if slower else float("inf")
    ok = ratio <= WALL_RATIO and once and failed["both"] <= worst_alone and all(
        r.exit_code == 0 for r in results)
    lines += [
        f"both / slower alone: {ratio:.2f}× (target ≤ {WALL_RATIO}×)",
        "shared consumers' rollouts in a run of both: " + ", ".join(
            f"{c} " + "/".join(str(r.rollouts[c]) for r in results if r.kind == "both")
            for c in SHARED) + " (target: 1 each); one at a time: " + ", ".join(
            f"{c} " + "/".join(str(sum(r.rollouts[c] for r in results
                                       if r.kind != "both" and r.index == i))
                               for i in sorted({r.index for r in results}))
            for c in SHARED),
        f"failed requests, both: {failed['both']:g} (target ≤ the slower alone's worst, "
        f"{worst_alone:g})",
        "target met" if ok else "target NOT met"]
    return lines, ok


def run(args: argparse.Namespace) -> int:
    out: Path = (args.out or BENCH_DIR / "results" /
                 datetime.now(UTC).strftime("several-%Y%m%dT%H%M%SZ")).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    lab = Lab((args.dir or out / "lab").resolve())
    if args.no_lab_up and args.dir is None:
        raise BenchError("--no-lab-up needs --dir DIR of a running lab")
    try:
        if args.no_lab_up:
            lab.borrow()
        else:
            print(f"lab up (realistic, nice {args.lab_nice}) in {lab.dir} …", file=sys.stderr)
            lab.up("realistic", None, args.lab_nice)
        params = chain_params.load(Path(lab.env["ROTATE_CHAIN"]), "dragonfly", None, None)
        targets = load_targets(lab)
        consumers = sorted({"cart", "inventory", "payment", *SHARED})
        results: list[Result] = []
        for i in range(args.runs):
            order = list(KINDS) if i % 2 == 0 else list(KINDS)[::-1]
            for kind in order:
                wait_steady(lab)
                wait_rolled(lab)
                print(f"round {i + 1}/{args.runs}: {kind} …", file=sys.stderr)
                r = one_run(kind, i, args, lab, targets, params, out, consumers)
                results.append(r)
                print(f"  wall {r.wall:.1f} s, exit {r.exit_code}, {r.failed} failed "
                      f"requests {r.failed_by}, rollouts {r.rollouts}", file=sys.stderr)
        lines, ok = verdict(results)
        print("\n".join(lines))
        (out / "results.json").write_text(json.dumps({
            "command": " ".join(sys.argv), "rps": args.rps, "loadavg": os.getloadavg(),
            "lab_nice": args.lab_nice,
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "runs": [vars(r) for r in results], "summary": lines}, indent=2) + "\n")
        print(f"\nresults: {out / 'results.json'}")
        return 0 if ok else 1
    finally:
        if lab.down():
            print(f"lab down: {lab.dir}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _sigterm)  # SIGTERM too stops the lab we started
    try:
        return run(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
