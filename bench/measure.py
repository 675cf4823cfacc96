"""One measured run: watches and load around one command (rotate or the runbook).

Invariants:

- Every process started here (kubectl watches, the command) is ended here, also on error
  and Ctrl-C; the load generator is stopped and drained.
- Load runs ``LEAD`` seconds before the command, then until every service has answered
  ``SETTLED`` seconds without a failure (at most ``TAIL_MAX`` seconds): a run's failures
  are counted in full, and the segment still ends by itself.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from bench.analysis import CriticalPath, Sample
from bench.chain_params import ChainParams
from bench.load import Load
from bench.observed import PodLife, eso_reaction, newest_pod, pod_lives
from bench.timeline import Step
from bench.world import BenchError, Event, Lab, Target, Watcher

LEAD, SETTLED, TAIL_MAX, COMMAND_TIMEOUT = 1.5, 2.0, 20.0, 300.0


@dataclass(frozen=True)
class Segment:
    kind: str
    index: int
    t0: float
    started: float
    ended: float
    t1: float
    exit_code: int
    samples: Sequence[Sample]
    pods: Sequence[PodLife]
    steps: Sequence[Step]
    critical_path: CriticalPath
    #: CPU seconds (user + system) of the command and every process it waited for (the
    #: runbook's bao/kubectl/curl): its own cost, unlike wall time, barely moved by how busy
    #: the machine is
    cpu: float = 0.0
    #: the machine's CPU busy fraction (all cores, /proc/stat) in the LEAD window — the load
    #: and the lab alone, before the command — and while the command ran
    busy_before: float | None = None
    busy_during: float | None = None

    @property
    def wall(self) -> float:
        return self.ended - self.started


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs so far (/proc/stat); None where there is none."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_between(a: tuple[int, int] | None, b: tuple[int, int] | None) -> float | None:
    """The busy fraction of all CPUs between two :func:`cpu_ticks` readings."""
    if a is None or b is None or b[1] <= a[1]:
        return None
    return (b[0] - a[0]) / (b[1] - a[1])


def _wait_until(check: Callable[[], object], deadline: float, what: str) -> None:
    while not check():
        if time.time() > deadline:
            raise BenchError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _settled(load: Load, names: Sequence[str], since: float) -> bool:
    """Every service answered ok for the last SETTLED seconds (and something was sent)."""
    now = time.time()
    recent = [s for s in list(load.samples) if s.sent >= max(since, now - SETTLED - 0.5)
              and s.sent + s.latency <= now]
    if now - since < SETTLED:
        return False
    return all(any(s.service == n for s in recent) for n in names) and all(
        s.ok for s in recent if s.sent >= now - SETTLED)


def readyz_rtt(target: Target, tries: int = 5) -> float | None:
    times: list[float] = []
    for _ in range(tries):
        started = time.perf_counter()
        conn = http.client.HTTPConnection(target.ip, target.port, timeout=2.0)
        try:
            conn.request("GET", "/readyz", headers={"Host": target.fqdn})
            if conn.getresponse().status == 200:
                times.append(time.perf_counter() - started)
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()
    return statistics.median(times) if times else None


def measure(kind: str, index: int, argv: Sequence[str], env: dict[str, str], lab: Lab,
            targets: Sequence[Target], params: ChainParams, rps: float, log: Path,
            steps_of: Callable[[float, float], list[Step]],
            timeout: float = COMMAND_TIMEOUT) -> Segment:
    watch_started = time.time()
    pods_w, es_w = Watcher(lab, "pods"), Watcher(lab, "externalsecrets")
    load: Load | None = None
    try:
        _wait_until(lambda: pods_w.events and es_w.events, time.time() + 30, "the watches")
        load = Load(targets, rps, LEAD + timeout + TAIL_MAX + 5).start()
        t0 = time.time()
        time.sleep(0.5)  # the load's first requests out: the busy baseline starts after
        ticks0 = cpu_ticks()
        time.sleep(LEAD - 0.5)  # the baseline: load before anything changes
        started, ticks1 = time.time(), cpu_ticks()
        with open(log, "w") as fh:
            code, cpu = run_command(argv, env, fh, timeout)
        ended, ticks2 = time.time(), cpu_ticks()
        names = [t.name for t in targets]
        deadline = ended + TAIL_MAX
        while not _settled(load, names, ended) and time.time() < deadline:
            time.sleep(0.1)
        samples = load.stop()
        t1 = time.time()
    finally:
        if load is not None:
            load.stop()
        pod_events, es_events = pods_w.stop(), es_w.stop()
    write_pod_log(log.with_suffix(".pods.csv"), pod_events)
    lives = pod_lives(pod_events, watch_started)
    steps: list[Step] = steps_of(started, ended)
    return Segment(kind, index, t0, started, ended, t1, code, samples, lives, steps,
                   _critical_path(lives, es_events, params, targets, started, steps), cpu,
                   busy_between(ticks0, ticks1), busy_between(ticks1, ticks2))


def write_pod_log(path: Path, events: Sequence[Event]) -> None:
    """Every pod event the harness's watch received, one line each (receipt time, type,
    pod, phase, per container started/ready, terminating): the server's own view of the
    pods, to check a waiter's verdict against after the run."""
    with open(path, "w") as fh:
        fh.write("at_epoch,type,pod,phase,containers_started,containers_ready,terminating\n")
        for ev in events:
            md, status = ev.obj.get("metadata") or {}, ev.obj.get("status") or {}
            cs = status.get("containerStatuses") or []
            fh.write(f"{ev.at:.3f},{ev.type},{md.get('namespace')}/{md.get('name')},"
                     f"{status.get('phase', '')},"
                     f"{'/'.join(str(bool(c.get('started'))).lower() for c in cs)},"
                     f"{'/'.join(str(bool(c.get('ready'))).lower() for c in cs)},"
                     f"{str(bool(md.get('deletionTimestamp'))).lower()}\n")


def run_command(argv: Sequence[str], env: dict[str, str], log: IO[str] | int,
                 timeout: float = COMMAND_TIMEOUT) -> tuple[int, float]:
    """(exit code, CPU seconds of the command and the processes it waited for); -1 when it
    was killed at ``timeout``.  ``os.wait4`` reaps it, for its resource usage."""
    proc = subprocess.Popen(list(argv), env=env, stdout=log, stderr=subprocess.STDOUT)
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    killer = threading.Timer(timeout, kill)
    killer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return (-1 if timed_out.is_set() else proc.returncode), usage.ru_utime + usage.ru_stime


def _critical_path(lives: Sequence[PodLife], es_events: Sequence[Event], params: ChainParams,
                   targets: Sequence[Target], started: float,
                   steps: Sequence[Step]) -> CriticalPath:
    es_ns, es_name = params.externalsecret.split("/", 1)
    eso = eso_reaction(es_events, es_ns, es_name)
    change, how, switch = _provider_change(lives, params, started, steps)
    pods = [p for ns, name in (c.split("/", 1) for c in params.consumers)
            if (p := newest_pod(lives, ns, name, started)) is not None]
    rollouts = tuple(p.start_to_ready for p in pods if p.start_to_ready is not None)
    prepared = switch is not None and any(p.created is not None and p.created < switch
                                          for p in pods)
    starts = tuple(p.started - p.created for p in pods
                   if p.started is not None and p.created is not None)
    # prepared while ESO reacted: a new consumer pod existed before ESO had synced
    beside_eso = prepared and eso is not None and any(
        p.created is not None and p.created < eso.synced for p in pods)
    readies = [p.ready for p in pods if p.ready is not None]
    catch_up = (max(0.0, max(readies) - switch)
                if prepared and switch is not None and readies else None)
    by_name = {t.name: t for t in targets}
    first = next((by_name[c.split("/", 1)[1]] for c in params.consumers
                  if c.split("/", 1)[1] in by_name), None)
    return CriticalPath(
        eso_reaction=eso.seconds if eso else None, provider_change=change,
        consumer_rollouts=rollouts, max_parallel=params.max_parallel,
        readyz=readyz_rtt(first) if first else None, provider_how=how, prepared=prepared,
        consumer_starts=starts, catch_up=catch_up, beside_eso=beside_eso)


#: the journaled kinds of a live provider change (no pod rolls)
LIVE_KINDS = ("provider.apply", "provider.verify")


def _provider_change(lives: Sequence[PodLife], params: ChainParams, started: float,
                     steps: Sequence[Step]) -> tuple[float | None, str, float | None]:
    """(how long the provider's change took, how it changed, when it switched): its new pod
    created → Ready when it rolled, else the first live apply + verify of the journal."""
    pns, pname = params.provider.split("/", 1)
    pod = newest_pod(lives, pns, pname, started)
    if pod is not None and pod.start_to_ready is not None:
        return pod.start_to_ready, "rollout", pod.ready
    live = [next((s for s in steps if s.kind == k), None) for k in LIVE_KINDS]
    done = [s for s in live if s is not None]
    if not done:
        return None, "unseen", None
    return sum(s.end - s.start for s in done), "live", max(s.end for s in done)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def journal_steps(state_dir: Path, started: float, ended: float) -> list[Step]:
    """step.start/step.done pairs of the (one) run journaled under ``state_dir``, between
    two synthetic steps: from the command's start to its first journaled step (Python
    starts, the chain file is loaded, the plan made), and from the last journal record to
    the process's exit (report, lock release, shutdown)."""
    journals = sorted(state_dir.glob("runs/*/journal.jsonl"))
    if not journals:
        return []
    open_: dict[int, tuple[str, str, float]] = {}
    steps: list[Step] = []
    last = started
    for line in journals[-1].read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            break
        last = max(last, _epoch(rec["ts"]))
        if "index" not in rec:
            continue
        if rec["event"] == "step.start":
            open_[int(rec["index"])] = (rec["kind"], rec["target"], _epoch(rec["ts"]))
        elif rec["event"] in ("step.done", "step.failed") and int(rec["index"]) in open_:
            kind, target, start = open_.pop(int(rec["index"]))
            steps.append(Step(kind, target, start, _epoch(rec["ts"])))
    if steps and steps[0].start > started:
        steps.insert(0, Step("start-up+plan", "before the first journaled step", started,
                             steps[0].start))
    if steps and ended > last:
        steps.append(Step("exit", "after the last journal record", last, ended))
    return steps


def runbook_steps(marks: Path, started: float = 0.0, ended: float = 0.0) -> list[Step]:
    """``EPOCH start|end STEP TARGET`` lines written by runbook.sh."""
    open_: dict[tuple[str, str], float] = {}
    steps: list[Step] = []
    if not marks.exists():
        return steps
    for line in marks.read_text().splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4:
            continue
        at, edge, kind, target = float(parts[0]), parts[1], parts[2], parts[3]
        if edge == "start":
            open_[(kind, target)] = at
        elif (kind, target) in open_:
            steps.append(Step(kind, target, open_.pop((kind, target)), at))
    return steps
