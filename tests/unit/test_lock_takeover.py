"""The run lock when its holder is dead: a Lease left by a run that journaled its end is
taken at once (no 30 s wait); a dead holder whose run did not end is named as such, with the
commands that take over — and ``--take-over-lock`` works without waiting for staleness."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rotate.core.errors import LockHeld
from rotate.engine.lock import HOST_ANNOTATION, PID_ANNOTATION, Lease
from tests.fakes import FakeKube, World
from tests.support.engine import run

NS, NAME = "rotate-system", "rotate-dragonfly"


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def held(kube: FakeKube, run_id: str, *, pid: int, host: str = "",
         renewed: datetime | None = None) -> None:
    kube.objects.pop(("Lease", NS, NAME), None)
    kube.put({"kind": "Lease",
              "metadata": {"name": NAME, "namespace": NS,
                           "annotations": {HOST_ANNOTATION: host or socket.gethostname(),
                                           PID_ANNOTATION: str(pid)}},
              "spec": {"holderIdentity": f"alice@{host or socket.gethostname()}/{run_id}",
                       "leaseDurationSeconds": 30,
                       "renewTime": (renewed or datetime.now(UTC)).strftime(
                           "%Y-%m-%dT%H:%M:%S.%fZ")}})


def holder_now(kube: FakeKube) -> str:
    return str(kube.raw("Lease", NS, NAME)["spec"]["holderIdentity"])


def lease(kube: FakeKube, ended: set[str]) -> Lease:
    return Lease(kube, NS, "dragonfly", "me@here/r2", run_ended=ended.__contains__)


def test_a_lease_left_by_a_run_that_ended_is_taken_at_once() -> None:
    kube = FakeKube()
    held(kube, "r1", pid=dead_pid())
    mine = lease(kube, {"r1"})
    mine.acquire(renew=False)
    assert holder_now(kube) == "me@here/r2"
    mine.release()


def test_a_dead_holder_whose_run_did_not_end_names_how_to_take_over() -> None:
    kube = FakeKube()
    pid = dead_pid()
    held(kube, "r1", pid=pid)
    with pytest.raises(LockHeld) as info:
        lease(kube, set()).acquire(renew=False)
    err = info.value
    assert err.exit_code == 4
    assert f"pid {pid} on this host, is gone" in err.message
    assert "wait" not in (err.hint or "")
    assert "rotate resume r1 --confirm" in (err.hint or "")
    assert "--take-over-lock" in (err.hint or "")
    assert holder_now(kube) == f"alice@{socket.gethostname()}/r1"
    taker = lease(kube, set())
    taker.acquire(take_over=True, renew=False)  # no waiting for staleness
    assert holder_now(kube) == "me@here/r2"


def test_a_live_holder_still_means_wait() -> None:
    kube = FakeKube()
    held(kube, "r1", pid=os.getpid())
    with pytest.raises(LockHeld) as info:
        lease(kube, {"r1"}).acquire(take_over=True, renew=False)
    assert "wait for that run to finish" in (info.value.hint or "")


def test_a_holder_on_another_host_says_when_it_can_be_taken_over() -> None:
    kube = FakeKube()
    renewed = datetime.now(UTC) - timedelta(seconds=10)
    held(kube, "r1", pid=dead_pid(), host="elsewhere.example", renewed=renewed)
    with pytest.raises(LockHeld) as info:
        lease(kube, {"r1"}).acquire(renew=False)
    hint = info.value.hint or ""
    assert "elsewhere.example" in hint and "--take-over-lock" in hint
    assert (renewed + timedelta(seconds=30)).strftime("%H:%M:%S") in hint


def test_the_next_run_is_not_blocked_by_a_lease_left_after_run_end(
    world: World, tmp_path: Path
) -> None:
    first = run(world, tmp_path)
    assert first.status == "succeeded", first.message
    # killed between journaling run.end and deleting its Lease:
    held(world.kube, first.run_id, pid=dead_pid())
    started = time.monotonic()
    second = run(world, tmp_path)
    assert second.status == "succeeded", second.message
    assert time.monotonic() - started < 10  # not the 30 s lease duration
