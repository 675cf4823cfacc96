"""A run whose lock was taken over says so (exit 5), naming the Lease, its new holder and
the next command, changes nothing more and undoes nothing; a process frozen past the lease's
duration notices at its next step boundary without waiting for its renewal thread; and a
take-over whose own preflight fails gives the Lease back instead of deleting it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rotate.core.errors import EXIT_LOCK_LOST, LockLost, PreflightFailed
from rotate.engine.lock import Lease
from tests.fakes import FakeKube, World, deployment
from tests.support.engine import (
    RecordingObserver,
    journal_lines,
    options,
    run,
)

NS, NAME = "rotate-system", "rotate-dragonfly"
OTHER = "bob@elsewhere/20261204T000000Z-dragonfly-ffff"


def _held_leases(monkeypatch: pytest.MonkeyPatch) -> list[Lease]:
    """The run's leases, acquired without the renewal thread (the test renews by hand)."""
    held: list[Lease] = []
    original = Lease.acquire

    def acquire(self: Lease, *, take_over: bool = False, renew: bool = True,
                reclaim_run: str | None = None) -> None:
        original(self, take_over=take_over, renew=False, reclaim_run=reclaim_run)
        held.append(self)

    monkeypatch.setattr(Lease, "acquire", acquire)
    return held


def _take_over(world: World, held: list[Lease], holder: str) -> None:
    """Another process takes the credential's Lease; the run's renewal notices."""
    world.kube.raw("Lease", NS, NAME)["spec"]["holderIdentity"] = holder
    assert not held[0].renew_once()


def test_a_run_whose_lock_was_taken_over_exits_5_naming_the_holder(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _held_leases(monkeypatch)
    obs = RecordingObserver()
    obs.on_start["config.harvest"] = lambda step: _take_over(world, held, OTHER)
    report = run(world, tmp_path, obs)
    assert (report.status, report.exit_code) == ("failed", EXIT_LOCK_LOST)
    assert EXIT_LOCK_LOST == 5
    assert f"lost its lock: Lease {NS}/{NAME} is held by {OTHER} now" in report.message
    assert "it stopped at step" in report.message and "State now:" in report.message
    # the step it was in when the lock was taken is journaled: another run took it
    assert all(s.status == "done" for s in report.steps if s.kind == "config.harvest")
    assert (f"When run 20261204T000000Z-dragonfly-ffff has finished (`rotate show "
            f"20261204T000000Z-dragonfly-ffff`), continue this run with `rotate resume "
            f"{report.run_id} --confirm`") in report.message
    # nothing after the boundary started, nothing prepared was undone
    started = {s.kind for s in report.steps if s.status != "pending"}
    assert not started & {"provider.apply", "provider.restart", "config.undo",
                          "consumer.undo", "token.revoke"}
    assert not any(e["event"] == "run.undo" for e in journal_lines(tmp_path, report.run_id))
    # the other holder's lease is left alone
    assert world.kube.raw("Lease", NS, NAME)["spec"]["holderIdentity"] == OTHER


def test_a_lock_taken_by_a_resume_of_the_same_run_journals_nothing_more(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _held_leases(monkeypatch)
    obs = RecordingObserver()
    seen: list[int] = []

    def resumed_elsewhere(step: Any) -> None:
        _take_over(world, held, f"me@here/{held[0].run_id}")
        seen.append(len(journal_lines(tmp_path, held[0].run_id)))

    obs.on_start["config.harvest"] = resumed_elsewhere
    with pytest.raises(LockLost) as exc:
        run(world, tmp_path, obs)
    assert exc.value.exit_code == 5
    assert "a process resuming this same run took it over" in exc.value.message
    assert f"rotate show {held[0].run_id}" in (exc.value.hint or "")
    # not even the end of the step it was in: the journal is the resuming process's now
    assert len(journal_lines(tmp_path, held[0].run_id)) == seen[0]


def test_a_process_frozen_past_the_lease_duration_checks_at_the_boundary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = FakeKube()
    lease = Lease(kube, NS, "dragonfly", "me@here/r1", duration=30)
    lease.acquire(renew=False)
    kube.raw("Lease", NS, NAME)["spec"]["holderIdentity"] = OTHER
    gets: list[str] = []
    real_get = kube.get
    monkeypatch.setattr(kube, "get", lambda *a: gets.append(a[2]) or real_get(*a))
    assert lease.still_held() and gets == []  # renewed just now: no request
    import rotate.engine.lock as lock_mod

    now = lock_mod.time.monotonic()
    monkeypatch.setattr(lock_mod.time, "monotonic", lambda: now + 31)  # frozen for 31 s
    assert not lease.still_held()
    assert lease.lost and lease.taken_by == OTHER and gets == [NAME]


def _stale(kube: FakeKube, holder: str) -> dict[str, Any]:
    renewed = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kube.put({"kind": "Lease", "metadata": {"name": NAME, "namespace": NS,
                                            "annotations": {"rotate.dev/host": "elsewhere"}},
              "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                       "renewTime": renewed, "leaseTransitions": 3}})
    return dict(kube.raw("Lease", NS, NAME)["spec"])


def test_a_take_over_whose_preflight_fails_gives_the_lease_back(
    world: World, tmp_path: Path
) -> None:
    before = _stale(world.kube, OTHER)
    world.kube.put(deployment("dragonfly", "dragonfly", paused=True))  # preflight refuses
    with pytest.raises(PreflightFailed):
        run(world, tmp_path, take_over_lock=True)
    lease = world.kube.raw("Lease", NS, NAME)
    assert lease["spec"] == before  # the previous holder, as it was: still locked
    assert lease["metadata"]["annotations"] == {"rotate.dev/host": "elsewhere"}
    assert world.vault.writes == 0


def test_a_take_over_that_ran_releases_the_lease(world: World, tmp_path: Path) -> None:
    _stale(world.kube, OTHER)
    report = run(world, tmp_path, take_over_lock=True)
    assert report.status == "succeeded", report.message
    assert ("Lease", NS, NAME) not in world.kube.objects


def test_a_resume_of_the_same_run_is_another_holder_though_its_identity_is_ours() -> None:
    """`rotate resume RUN --take-over-lock` holds the Lease as ``user@host/RUN`` — the
    identity of the frozen run it took it from: the pid tells them apart, so the frozen
    process notices the loss and never deletes the resume's Lease."""
    kube = FakeKube()
    lease = Lease(kube, NS, "dragonfly", "me@here/r1", duration=30)
    lease.acquire(renew=False)
    kube.raw("Lease", NS, NAME)["metadata"]["annotations"]["rotate.dev/pid"] = "1"
    assert not lease.renew_once()
    assert lease.lost and lease.taken_by == "me@here/r1"
    lease.release()
    assert kube.raw("Lease", NS, NAME)["spec"]["holderIdentity"] == "me@here/r1"


def test_a_resume_that_already_finished_and_deleted_the_lease_is_told_by_the_journal(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frozen process thaws after the resume that took its lock finished and deleted
    the Lease: the journal's last run.resume (another process) says whose run it is now,
    so this process journals nothing more — the run stays as the resume left it."""
    import json

    held = _held_leases(monkeypatch)
    obs = RecordingObserver()
    seen: list[int] = []

    def resumed_and_finished(step: Any) -> None:
        run_id = held[0].run_id
        path = tmp_path / "state" / "runs" / run_id / "journal.jsonl"
        with path.open("a") as fh:
            for event, data in (("run.resume", {"process": {"host": "h", "pid": 1}}),
                                ("run.end", {"status": "succeeded", "exit_code": 0})):
                fh.write(json.dumps({"data": data, "event": event,
                                     "ts": "2026-12-04T00:00:00.000000Z"}) + "\n")
        world.kube.objects.pop(("Lease", NS, NAME))
        assert not held[0].renew_once()
        seen.append(len(journal_lines(tmp_path, run_id)))

    obs.on_start["config.harvest"] = resumed_and_finished
    with pytest.raises(LockLost) as exc:
        run(world, tmp_path, obs)
    assert "was deleted" in exc.value.message and exc.value.exit_code == 5
    assert len(journal_lines(tmp_path, held[0].run_id)) == seen[0]
    assert world.engine().show(options(tmp_path), held[0].run_id).status == "succeeded"
