"""Lock (Lease) semantics and rollback through the whole chain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rotate.core.errors import LockHeld, PreflightFailed, UsageError
from rotate.core.waiting import CancelToken
from rotate.engine.lock import Lease
from tests.fakes import FakeKube, World, deployment
from tests.support.engine import (
    RecordingObserver,
    options,
    rollback,
    run,
)


def _lease(kube: FakeKube, holder: str, renewed: datetime) -> None:
    kube.put({"kind": "Lease", "metadata": {"name": "rotate-dragonfly",
                                            "namespace": "rotate-system"},
              "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                       "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}})


def test_lock_held_exits_4_and_names_holder(world: World, tmp_path: Path) -> None:
    _lease(world.kube, "alice@host/run-1", datetime.now(UTC))
    with pytest.raises(LockHeld) as exc:
        run(world, tmp_path)
    assert exc.value.exit_code == 4
    assert "alice@host/run-1" in exc.value.message
    assert world.vault.writes == 0
    assert world.kube.raw("Lease", "rotate-system", "rotate-dragonfly")["spec"][
        "holderIdentity"] == "alice@host/run-1"


def test_stale_lease_needs_take_over(world: World, tmp_path: Path) -> None:
    _lease(world.kube, "bob@host/run-0", datetime.now(UTC) - timedelta(minutes=5))
    with pytest.raises(LockHeld) as exc:
        run(world, tmp_path)
    assert "stale lease held by bob@host/run-0" in exc.value.message
    assert "--take-over-lock" in exc.value.message
    report = run(world, tmp_path, take_over_lock=True)
    assert report.status == "succeeded", report.message


def test_lease_renew_and_loss(world: World) -> None:
    lease = Lease(world.kube, "rotate-system", "dragonfly", "me@h/r1", duration=30)
    lease.acquire(renew=False)
    spec = world.kube.raw("Lease", "rotate-system", "rotate-dragonfly")["spec"]
    first = spec["renewTime"]
    assert spec["holderIdentity"] == "me@h/r1" and spec["leaseDurationSeconds"] == 30
    assert lease.renew_once()
    assert world.kube.raw("Lease", "rotate-system", "rotate-dragonfly")["spec"][
        "renewTime"] >= first
    # someone takes it: we notice, and release does not delete their lease
    world.kube.raw("Lease", "rotate-system", "rotate-dragonfly")["spec"][
        "holderIdentity"] = "thief"
    assert not lease.renew_once() and lease.lost
    lease.release()
    assert ("Lease", "rotate-system", "rotate-dragonfly") in world.kube.objects


def test_paused_provider_blocks_in_preflight_and_changes_nothing(
    world: World, tmp_path: Path
) -> None:
    world.kube.put(deployment("dragonfly", "dragonfly", paused=True))
    plan = world.engine().plan(options(tmp_path), "dragonfly")
    assert not plan.ok
    trap = next(t for t in plan.traps if t.name == "paused-deployment")
    assert trap.blocking and "unpause" in trap.action
    with pytest.raises(PreflightFailed) as exc:
        run(world, tmp_path)
    assert exc.value.exit_code == 3
    assert "paused" in exc.value.message
    assert world.vault.writes == 0 and world.kube.patches == []


def test_overlap_without_previous_key_is_refused_as_usage(world: World, tmp_path: Path) -> None:
    """A rollout provider holds two values only through previousKey: exit 2 (the strategy
    rule), naming the credential, for the plan and the run alike; nothing written."""
    for attempt in (lambda: world.engine().plan(options(tmp_path, strategy="overlap"),
                                                "dragonfly"),
                    lambda: run(world, tmp_path, strategy="overlap")):
        with pytest.raises(UsageError) as exc:
            attempt()
        assert exc.value.exit_code == 2
        assert "overlap.previousKey" in exc.value.message and "'dragonfly'" in exc.value.message
    assert world.vault.writes == 0


def test_invalid_candidate_fails_preflight_without_showing_it(
    world: World, tmp_path: Path
) -> None:
    from rotate.core.secret import Secret

    with pytest.raises(PreflightFailed) as exc:
        world.engine().run(options(tmp_path), "dragonfly", RecordingObserver(), CancelToken(),
                new_value=Secret("too-short-VALUE"))
    assert "cart: /dragonfly/password: must be at least 32 characters long" in exc.value.message
    assert "too-short-VALUE" not in exc.value.message
    assert world.vault.writes == 0


def test_rollback_restores_every_link(world: World, tmp_path: Path) -> None:
    old = world.vault.current("infra/dragonfly", "password")
    report = run(world, tmp_path)
    assert report.status == "succeeded"
    new = world.vault.current("infra/dragonfly", "password")
    assert new != old
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    assert rb.extra["operation"] == "rollback" and rb.extra["of_run"] == report.run_id
    versions = world.vault.versions["infra/dragonfly"]
    assert len(versions) == 4 and versions[-1] == versions[1]  # v2's data as v4
    assert world.kube.secret_value("dragonfly", "dragonfly-password-secret", "password") == old
    for name in ("cart", "order", "user"):
        docs = world.cc.docs[(name, "bootstrap")]
        assert len(docs) == 3 and docs[-1] == docs[0]
        assert world.running[name] == old
    assert world.running["dragonfly"] == old
    assert world.engine().show(options(tmp_path), report.run_id).status == "rolled-back"
    with pytest.raises(UsageError):
        rollback(world, tmp_path, report.run_id)


def test_rollback_of_a_run_that_wrote_nothing(world: World, tmp_path: Path) -> None:
    from rotate.core.errors import TemporaryError

    world.vault.faults.arm("write", TemporaryError("vault", "write", "unavailable"), times=-1)
    report = run(world, tmp_path, timeout=0.4)
    assert report.exit_code == 10
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded" and rb.steps == ()
    assert "nothing to roll back" in rb.message
    assert len(world.vault.versions["infra/dragonfly"]) == 2


def test_run_that_lost_its_lock_stops_at_the_next_step(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    obs = RecordingObserver()
    holder: list[Lease] = []
    original = Lease.acquire

    def acquire(self: Lease, *, take_over: bool = False, renew: bool = True,
                reclaim_run: str | None = None) -> None:
        original(self, take_over=take_over, renew=False, reclaim_run=reclaim_run)
        holder.append(self)

    monkeypatch.setattr(Lease, "acquire", acquire)

    def steal(step: object) -> None:
        holder[0].lost = True

    obs.on_start["backend.write"] = steal
    report = run(world, tmp_path, obs)
    assert report.status == "failed" and report.exit_code == 5  # lock lost, not a stage
    assert "lost its lock" in report.message
    kinds = [s.kind for s in report.steps if s.status == "done"]
    assert kinds == ["preflight", "backend.write"]


def test_resume_reclaims_its_own_dead_holder_only(world: World) -> None:
    import os
    import socket
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()

    def held_by(run_id: str, pid: int) -> None:
        world.kube.objects.pop(("Lease", "rotate-system", "rotate-dragonfly"), None)
        _lease(world.kube, f"me@{socket.gethostname()}/{run_id}", datetime.now(UTC))
        world.kube.raw("Lease", "rotate-system", "rotate-dragonfly")["metadata"][
            "annotations"] = {"rotate.dev/host": socket.gethostname(), "rotate.dev/pid": str(pid)}

    held_by("r1", dead.pid)
    with pytest.raises(LockHeld):  # not resuming r1: its holder may not be reclaimed
        Lease(world.kube, "rotate-system", "dragonfly", "x/r2").acquire(renew=False)
    with pytest.raises(LockHeld):  # r1's holder is alive
        held_by("r1", os.getpid())
        Lease(world.kube, "rotate-system", "dragonfly", "x/r1").acquire(
            renew=False, reclaim_run="r1")
    held_by("r1", dead.pid)
    lease = Lease(world.kube, "rotate-system", "dragonfly", "x/r1")
    lease.acquire(renew=False, reclaim_run="r1")
    assert world.kube.raw("Lease", "rotate-system", "rotate-dragonfly")["spec"][
        "holderIdentity"] == "x/r1"
    lease.release()
