"""The fault matrix's case "watcher leader killed" (bench/faults.py runs it): two ``rotate
watch`` replicas against the lab (local processes, each its own process group as a pod is),
a human's ``bao kv put`` of the path, and the leader — with the adopt run it started as a
child — killed (SIGKILL of its process group) the moment that run's journal shows
``step.start`` of the spec's kind (both replicas frozen first, SIGSTOP, while the Lease
says which one leads).

Recovery ``resume``: nobody types anything — the other replica takes the leader Lease,
finds the adopt run unfinished with its holder gone and resumes it
(``--take-over-lock``); the case waits until the run reads ``succeeded``.  Recovery
``rollback``: the other replica is stopped with the leader (SIGTERM, before it leads), and
the operator rolls the run back.  Then the checks of every case (bench/faults.py): the hand
value through the whole chain with no version of rotate's own, or the value from before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable

from bench.fault_world import Journal, World, wait
from bench.world import BenchError

LEASE_SECONDS = "3"


def _spawn(world: World, credential: str, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rotate", "watch", credential, f"--listen=127.0.0.1:{port}",
         f"--lease-seconds={LEASE_SECONDS}", "--resync=1"],
        env=world.env, cwd=world.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def _leader(world: World, pids: set[int]) -> int | None:
    """The pid of the replica holding Lease ``rotate-watch``, when it is one of ``pids``."""
    try:
        lease = world.lab.kubectl_json("get", "lease", "-n", "rotate-system", "rotate-watch")
    except BenchError:
        return None  # not created yet
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    pid = holder.rpartition("/")[2]
    return int(pid) if pid.isdigit() and int(pid) in pids else None


def _stop(proc: subprocess.Popen[str], sig: int) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def kill_leader_mid_run(world: World, credential: str, known: set[str], kind: str,
                        recovery: str, put: Callable[[], None]
                        ) -> tuple[Journal, str, list[str]]:
    """The case up to its recovery: the run's journal, its last event when the leader was
    killed, and what went wrong.  ``put``: the
    human's ``bao kv put`` (called once both replicas run and one leads)."""
    problems: list[str] = []
    reached = ""
    procs = [_spawn(world, credential, port) for port in (18481, 18482)]
    journal = Journal(world.runs, credential, known)
    try:
        pids = {p.pid for p in procs}
        if not wait(lambda: _leader(world, pids) is not None, 60, every=0.2):
            raise BenchError("no watch replica took the leader Lease")
        put()
        if not wait(lambda: journal.started(kind), 120, every=0.001):
            raise BenchError(f"the leader's adopt run never started {kind}")
        for proc in procs:  # both frozen at once (with their runs): then the leader killed
            os.killpg(proc.pid, signal.SIGSTOP)
        reached = journal.last()
        leader = _leader(world, pids)
        if leader is None:
            raise BenchError("no replica of ours held the leader Lease at the kill")
        os.killpg(leader, signal.SIGKILL)
        for proc in procs:
            if proc.pid != leader:
                os.killpg(proc.pid, signal.SIGCONT)
        other = next(p for p in procs if p.pid != leader)
        if recovery == "rollback":
            _stop(other, signal.SIGTERM)
        run_id = journal.run_id_now()
        if run_id is None:
            raise BenchError("the killed run has no journal")
        if recovery == "resume" and not wait(
                lambda: world.run_status(run_id) == "succeeded", 240, every=0.5):
            problems.append(f"the other replica did not finish the run (it reads "
                            f"{world.run_status(run_id)})")
    finally:
        for proc in procs:
            _stop(proc, signal.SIGTERM)
    return journal, reached, problems
