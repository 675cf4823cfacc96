"""Rotation benchmark: `rotate CRED --confirm` against the manual runbook, side by side.

One run brings up the lab (realistic profile) in its own directory, puts steady load on
every shop service's /work through its ClusterIP, and measures, run after run, (a) rotate,
(b) bench/runbook.sh, (c) the chain's critical path from the world's own timings. It prints
one table, writes OUT/results.json and OUT/timeline.svg, and stops the lab it started —
also on error and Ctrl-C.

    .venv/bin/python -m bench.rotation [--runs 3] [--credential dragonfly] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from bench import analysis, chain_params, floor, overhead, reaction, timeline
from bench.measure import (
    COMMAND_TIMEOUT,
    Segment,
    journal_steps,
    measure,
    run_command,
    runbook_steps,
)
from bench.world import BENCH_DIR, BenchError, Lab, Target, load_targets, tool
from rotate.core.durations import parse_duration

KINDS = ("rotate", "runbook")
#: the niceness of the lab a run starts (rotate_lab.host.priority): at 19 a lab session weighs
#: 15 against a measured command's 1024, so the command gets a core when it wants one, as
#: on a machine of its own (docs/performance.md "Reading the numbers")
LAB_NICE = 19


def _bounded(lo: float, hi: float,
             cast: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(text: str) -> int | float:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range [{lo:g}, {hi:g}]")
        return value
    return parse


def _duration(text: str) -> str:
    """``text`` if rotate's ``--timeout`` accepts it (checked before any lab starts)."""
    try:
        if parse_duration(text) <= 0:
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a positive duration: {text!r} "
                                         "(use e.g. 90s, 5m)") from None
    return text


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench.rotation",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--credential", default="dragonfly", help="credential of the chain file "
                    "(default dragonfly)")
    ap.add_argument("--strategy", choices=("restart", "overlap"),
                    help="passed to rotate --strategy (default: the chain file's)")
    ap.add_argument("--runs", type=_bounded(1, 20, int), default=3,
                    help="runs of each kind, interleaved (default 3)")
    ap.add_argument("--max-parallel", type=_bounded(1, 100, int),
                    help="rotate --max-parallel, and the critical path's parallelism "
                    "(default: the chain file's)")
    ap.add_argument("--services", type=_bounded(3, 100, int),
                    help="consumers of dragonfly, passed to `rotate lab up --services N` "
                    "(3-100; default: the lab's 3)")
    ap.add_argument("--lab-nice", type=_bounded(0, 19, int), metavar="N",
                    help=f"niceness of the lab this run starts (`rotate lab up --nice N`; "
                    f"default {LAB_NICE}, 0 for the lab's own default): the measured "
                    "commands then get a core when they want one, as beside a real cluster "
                    "(docs/performance.md)")
    ap.add_argument("--rps", type=_bounded(0.5, 100, float), default=20.0,
                    help="requests per second on each service's /work (default 20)")
    ap.add_argument("--out", type=Path, help="results directory (default "
                    "bench/results/<UTC time>)")
    ap.add_argument("--dir", type=Path, help="lab directory (default OUT/lab)")
    ap.add_argument("--no-lab-up", action="store_true", help="use the lab already running "
                    "in --dir; do not start or stop it")
    ap.add_argument("--only", choices=KINDS, help="measure one kind only")
    ap.add_argument("--command-timeout", type=_bounded(10, 3600, float), default=COMMAND_TIMEOUT,
                    metavar="S",
                    help=f"kill a command still running after S seconds (default "
                         f"{COMMAND_TIMEOUT:g}; 100 consumers on a busy 2-core lab may need more)")
    ap.add_argument("--step-timeout", metavar="DURATION", type=_duration,
                    help="rotate --timeout: its per-step deadline, e.g. 5m (default: the chain "
                         "file's; the lab's 120 s can be too short for 100 consumers' rollouts "
                         "on a saturated 2-core lab)")
    return ap


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def wait_steady(lab: Lab, deadline_s: float = 120.0) -> None:
    """Every pod Ready and none terminating: the previous run has fully settled."""
    deadline = time.time() + deadline_s
    while True:
        pods = lab.kubectl_json("get", "pods", "-A")["items"]
        if pods and all(
                not p["metadata"].get("deletionTimestamp") and any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (p.get("status") or {}).get("conditions") or []) for p in pods):
            return
        if time.time() > deadline:
            raise BenchError("the lab did not settle (pods not Ready) within "
                             f"{deadline_s:.0f}s after a run; see `kubectl get pods -A`")
        time.sleep(0.5)


def one_run(kind: str, i: int, args: argparse.Namespace, lab: Lab, targets: list[Target],
            params: chain_params.ChainParams, out: Path,
            requests: list[dict[str, int]], floors: list[floor.Floor]) -> Segment:
    """One measured run; for rotate, its API requests (the lab's count) go to ``requests``
    and the start-up floor measured after it (the lab settled again) to ``floors``."""
    if kind != "rotate":
        return _one_run(kind, i, args, lab, targets, params, out)
    before = overhead.api_counts(lab)
    seg = _one_run(kind, i, args, lab, targets, params, out)
    requests.append(overhead.difference(before, overhead.api_counts(lab)))
    wait_steady(lab)
    floors.append(floor.measure_floor(targets, args.rps))
    return seg


def review_plan(lab: Lab, params: chain_params.ChainParams, out: Path) -> None:
    """The operator's first command, not measured: ``rotate CRED`` — the plan, which changes
    nothing — before any ``--confirm`` run, as the workflow has it (cli.md: plan, read,
    confirm).  Like any command it leaves the chain file's validation in the validated-chain
    cache, so the measured runs start as a ``--confirm`` after its plan does; the cost of a
    first or edited chain file is bench/startup.py's cold figure.  Without this step the
    first run of every fresh lab would pay it alone: 0.5 s of CPU for the 1,900-line chain
    file of 100 consumers.  Its log: ``OUT/logs/plan.log``; a refused plan stops the benchmark."""
    log = out / "logs" / "plan.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [tool("rotate"), params.credential, *params.strategy_args(),
            "--max-parallel", str(params.max_parallel)]
    started = time.time()
    with open(log, "w") as fh:
        code, _ = run_command(argv, lab.env, fh, COMMAND_TIMEOUT)
    if code == -1:
        raise BenchError(f"the plan `rotate {params.credential}` did not finish within "
                         f"{COMMAND_TIMEOUT:.0f} s ({log})")
    if code != 0:
        tail = log.read_text(errors="replace").strip()[-2000:]
        raise BenchError(f"the plan `rotate {params.credential}` exited {code} ({log}):\n{tail}")
    print(f"plan reviewed (`rotate {params.credential}`, not measured): "
          f"{time.time() - started:.1f} s", file=sys.stderr)


def _one_run(kind: str, i: int, args: argparse.Namespace, lab: Lab, targets: list[Target],
             params: chain_params.ChainParams, out: Path) -> Segment:
    state = out / "state" / f"{kind}-{i}"
    state.mkdir(parents=True, exist_ok=True)
    env = {**lab.env, "ROTATE_STATE_DIR": str(state)}
    if kind == "rotate":
        argv = [tool("rotate"), params.credential, "--confirm", *params.strategy_args(),
                "--max-parallel", str(params.max_parallel), "--state-dir", str(state)]
        if args.step_timeout:
            argv += ["--timeout", args.step_timeout]
        return measure(kind, i, argv, env, lab, targets, params, args.rps,
                       out / "logs" / f"rotate-{i}.log",
                       lambda started, ended: journal_steps(state, started, ended),
                       args.command_timeout)
    marks = state / "steps.txt"
    env.update(params.runbook_env(), BAO=tool("bao"), RUNBOOK_STEPS=str(marks))
    argv = ["bash", str(BENCH_DIR / "runbook.sh")]
    return measure(kind, i, argv, env, lab, targets, params, args.rps,
                   out / "logs" / f"runbook-{i}.log",
                   lambda started, ended: runbook_steps(marks, started, ended),
                   args.command_timeout)


def to_result(seg: Segment, services: list[str]) -> analysis.RunResult:
    # Failures count from the baseline on: a failure before the command is the lab's, and
    # shows in the table as such.
    return analysis.RunResult(seg.kind, seg.index, seg.wall, seg.exit_code, seg.critical_path,
                              analysis.outcomes(seg.samples, services))


def panel(seg: Segment, title: str) -> timeline.Panel:
    failures: dict[str, list[float]] = {}
    for s in seg.samples:
        if not s.ok:
            failures.setdefault(s.service, []).append(s.sent)
    services = sorted({p.app for p in seg.pods})
    return timeline.Panel(title, seg.t0, seg.t1, (seg.started, seg.ended), seg.steps,
                          seg.pods, failures, services)


def time_split(segs: list[Segment]) -> str:
    """Per kind, where the wall time goes: per step kind, the median over the runs of the
    time at least one step of that kind was running, in order of first appearance."""
    lines = []
    for kind in KINDS:
        spans: dict[str, list[float]] = {}
        for g in (g for g in segs if g.kind == kind):
            for step_kind in dict.fromkeys(s.kind for s in g.steps):
                mine = [s for s in g.steps if s.kind == step_kind]
                spans.setdefault(step_kind, []).append(
                    analysis.busy_time([(s.start, s.end) for s in mine]))
        if spans:
            lines.append(f"{kind} time split (median busy time per step kind, s): " + ", ".join(
                f"{k} {statistics.median(v):.2f}" for k, v in spans.items()))
    return "\n".join(lines)


def cpu_line(segs: list[Segment]) -> str:
    """The commands' own CPU time (median per kind): what each costs the machine, which
    wall time under a saturated 2-core lab hides."""
    parts = []
    for kind in KINDS:
        cpus = [g.cpu for g in segs if g.kind == kind]
        if cpus:
            parts.append(f"{kind} {statistics.median(cpus):.2f} s ("
                         + " / ".join(f"{c:.2f}" for c in cpus) + ")")
    busy = [(g.busy_before, g.busy_during) for g in segs
            if g.busy_before is not None and g.busy_during is not None]
    line = "CPU time of the command and its children (median): " + ", ".join(parts)
    if busy:
        line += ("\nmachine CPU busy (all cores, median): load alone before the command "
                 f"{statistics.median(b for b, _ in busy):.0%}, while it ran "
                 f"{statistics.median(d for _, d in busy):.0%}")
    return line


def nice_line(nice: int) -> str:
    """Which CPU priority the lab ran at, beside the measured commands at their own."""
    return (f"lab at nice {nice}: every lab process and pod yields the CPU to the measured "
            "commands (as a cluster runs on other machines than the operator's)" if nice else
            "lab at nice 0: the measured commands share the CPU with each lab process and "
            "pod as equals")


def write_outputs(out: Path, args: argparse.Namespace, segs: list[Segment],
                  results: list[analysis.RunResult], services: list[str], table: str,
                  params: chain_params.ChainParams,
                  requests: list[dict[str, int]], floors: list[floor.Floor],
                  lab_nice: int) -> None:
    load1, load5, load15 = os.getloadavg()
    doc = {
        "command": " ".join(sys.argv),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "credential": params.credential, "strategy": params.strategy_label(),
        "max_parallel": params.max_parallel, "rps": args.rps, "services": services,
        "consumers": list(params.consumers), "loadavg": [load1, load5, load15],
        "lab_nice": lab_nice,
        "rotate_overhead": [{**vars(o), "own": o.own} for o in (
            overhead.overhead_of(g) for g in segs if g.kind == "rotate")],
        "rotate_api_requests": requests,
        "startup_floor": [vars(f) for f in floors],
        "table": table,
        "runs": [{"kind": r.kind, "index": r.index, "wall": r.wall, "cpu": g.cpu,
                  "busy_before": g.busy_before, "busy_during": g.busy_during,
                  "exit_code": r.exit_code,
                  "critical_path": r.critical_path.as_dict(), "failed": r.failed,
                  "services": {s: {"requests": o.requests, "failed": o.failed,
                                   "window": o.window} for s, o in r.services.items()},
                  "steps": [{"kind": st.kind, "target": st.target, "start": st.start - g.started,
                             "seconds": st.end - st.start} for st in g.steps]}
                 for r, g in zip(results, segs, strict=True)],
    }
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "samples").mkdir(exist_ok=True)
    for g in segs:
        with open(out / "samples" / f"{g.kind}-{g.index}.csv", "w") as fh:
            fh.write("service,sent_epoch,ok,latency_s\n")
            fh.writelines(f"{x.service},{x.sent:.4f},{int(x.ok)},{x.latency:.4f}\n"
                          for x in g.samples)
    walls = {k: sorted((s for s in segs if s.kind == k), key=lambda s: s.wall) for k in KINDS}
    rotates = walls["rotate"] or walls["runbook"]
    pick = rotates[len(rotates) // 2].index  # the median rotate run, and its runbook twin
    chosen = [s for s in segs if s.index == pick]
    titles = {"rotate": " ".join(["rotate", params.credential, "--confirm",
                                  *params.strategy_args(), "--max-parallel",
                                  str(params.max_parallel)]),
              "runbook": "bench/runbook.sh (the manual runbook, sequential)"}
    panels = [panel(s, f"{titles[s.kind]} — wall {s.wall:.1f} s, "
                       f"{sum(not x.ok for x in s.samples)} failed requests") for s in chosen]
    heading = (f"Rotation of {params.credential}, run {pick + 1} of {args.runs}, "
               f"{args.rps:g} req/s on each service's /work")
    (out / "timeline.svg").write_text(timeline.render(panels, heading))


def run(args: argparse.Namespace) -> int:
    out: Path = (args.out or BENCH_DIR / "results" /
                 datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    lab = Lab((args.dir or out / "lab").resolve())
    if args.no_lab_up and args.dir is None:
        raise BenchError("--no-lab-up needs --dir DIR of a running lab")
    try:
        if args.no_lab_up:
            for given, option in ((args.services, "--services"), (args.lab_nice, "--lab-nice")):
                if given is not None:
                    raise BenchError(f"{option} sets up a lab this run starts; it cannot "
                                     "change the lab of --no-lab-up")
            lab.borrow()
        else:
            if args.services is not None:
                lab.check_services_option()
            nice = LAB_NICE if args.lab_nice is None else args.lab_nice
            print(f"lab up (realistic, nice {nice}) in {lab.dir} …", file=sys.stderr)
            lab.up("realistic", args.services, nice)
        lab_nice = lab.nice()  # read once: the run's output line and results.json name it
        if lab.profile() != "realistic":
            print(f"warning: the lab in {lab.dir} runs profile {lab.profile()}, not "
                  "realistic: timings are not comparable", file=sys.stderr)
        if "ROTATE_CHAIN" not in lab.env:
            raise BenchError(f"{lab.dir}/env sets no ROTATE_CHAIN: is it a rotate lab?")
        chain = Path(lab.env["ROTATE_CHAIN"])
        params = chain_params.load(chain, args.credential, args.strategy, args.max_parallel)
        targets = load_targets(lab)
        services = [t.name for t in targets]
        segs: list[Segment] = []
        requests: list[dict[str, int]] = []
        floors: list[floor.Floor] = []
        kinds = [args.only] if args.only else list(KINDS)
        if "rotate" in kinds:
            review_plan(lab, params, out)
        for i in range(args.runs):
            order = kinds if i % 2 == 0 else kinds[::-1]  # interleaved: drift hits both
            for kind in order:
                wait_steady(lab)
                print(f"run {i + 1}/{args.runs}: {kind} …", file=sys.stderr)
                seg = one_run(kind, i, args, lab, targets, params, out, requests, floors)
                segs.append(seg)
                print(f"  wall {seg.wall:.1f} s, exit {seg.exit_code}, "
                      f"{sum(not s.ok for s in seg.samples)} failed requests", file=sys.stderr)
        segs.sort(key=lambda s: (KINDS.index(s.kind), s.index))
        results = [to_result(s, services) for s in segs]
        table = (analysis.render_table(analysis.summarize(results, services), services)
                 + "\n\n" + analysis.render_critical_path(results))
        overheads = [overhead.overhead_of(g) for g in segs if g.kind == "rotate"]
        split = "\n".join(line for line in (
            time_split(segs), cpu_line(segs), nice_line(lab_nice),
            overhead.render(overheads, requests, len(params.consumers)),
            reaction.render([reaction.reaction_of(g, params.consumers) for g in segs
                             if g.kind == "rotate"]),
            floor.render(floors, [o.startup for o in overheads]),
            floor.render_headroom(floors, [r.critical_path.total for r in results
                                           if r.kind == "rotate"])) if line)
        print(table + "\n" + split)
        write_outputs(out, args, segs, results, services, table + "\n" + split, params,
                      requests, floors, lab_nice)
        cpu = os.times()
        print(f"\nresults: {out / 'results.json'}\ntimeline: {out / 'timeline.svg'}\n"
              f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; the harness "
              f"itself used {cpu.user + cpu.system:.0f} s CPU (the commands it ran: "
              f"{cpu.children_user + cpu.children_system:.0f} s)")
        failed = [f"{r.kind} run {r.index + 1} exited {r.exit_code}"
                  for r in results if r.exit_code != 0]
        if failed:
            print("error: " + "; ".join(failed) + f" (logs in {out / 'logs'})", file=sys.stderr)
            return 1
        return 0
    finally:
        said = lab.down()
        if said:
            print(f"lab down: {lab.dir}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _sigterm)  # SIGTERM too stops the lab we started
    try:
        return run(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a tool missing (kubectl, bash), a full disk …
        print(f"error: {exc.strerror or type(exc).__name__}: {exc.filename or ''}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
