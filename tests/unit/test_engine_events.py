"""Kubernetes Events of a run (rotate.engine.events) against the fakes: on which objects, with
which reasons, the run id in each, never a value — and never a reason for a run to fail."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rotate.clients.seams import KubeEvent
from rotate.core.errors import ForbiddenError
from rotate.core.refs import ObjectRef
from rotate.engine import events as events_mod
from rotate.engine.model import PlannedStep
from tests.fakes import World
from tests.support.engine import (
    RecordingObserver,
    journal_lines,
    rollback,
    run,
)

ES = ObjectRef("ExternalSecret", "dragonfly", "dragonfly-password")
CART = ObjectRef("Deployment", "shop", "cart")


def _reasons(world: World, ref: ObjectRef) -> list[str]:
    return [e.reason for e in world.kube.kube_events if e.involved == ref]


def test_a_rotation_tells_its_story_on_every_object_it_changed(
        world: World, tmp_path: Path) -> None:
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    events = world.kube.kube_events
    assert all(report.run_id in e.message and e.instance == report.run_id for e in events)
    assert _reasons(world, ES) == ["BackendWritten", "SyncRequested", "CredentialRotated"]
    # a step that only proves (sync.wait, the rollout waits, readyz) has no event of its own
    assert _reasons(world, ObjectRef("Secret", "dragonfly", "dragonfly-password-secret")) == [
        "CredentialRotated"]
    assert _reasons(world, ObjectRef("Deployment", "dragonfly", "dragonfly")) == [
        "RolloutRestarted", "CredentialRotated"]
    assert _reasons(world, CART) == ["ConfigWritten", "RolloutRestarted", "TokensRevoked",
                                     "CredentialRotated"]
    # a token Secret's story is its token: no success event of its own
    assert _reasons(world, ObjectRef("Secret", "shop", "cart-config-token")) == ["TokenMinted"]
    assert {e.type for e in events} == {"Normal"}
    cart = world.kube.raw("Deployment", "shop", "cart")["metadata"]["uid"]
    assert {e.uid for e in events if e.involved == CART} == {cart}  # describe selects by uid
    assert report.extra["events"] == {"created": len(events), "failed": 0}
    new = world.vault.current("infra/dragonfly", "password")
    stored = json.dumps(world.kube.list("Event", "shop") + world.kube.list("Event", "dragonfly"))
    assert new not in stored and new not in json.dumps([e.message for e in events])


def test_a_failed_step_is_a_warning_on_its_object_and_the_run_a_rotation_failure(
        world: World, tmp_path: Path) -> None:
    obs = RecordingObserver()

    def sabotage(step: PlannedStep) -> None:
        world.running["cart"] = "stale"
    obs.on_start["readyz.check"] = sabotage
    report = run(world, tmp_path, obs, timeout=0.4)
    assert report.exit_code == 16
    warnings = [e for e in world.kube.kube_events if e.involved == CART and e.type == "Warning"]
    assert [e.reason for e in warnings] == ["StepFailed", "RotationFailed"]
    assert f"rotate resume {report.run_id} --confirm" in warnings[-1].message
    assert "RotationFailed" in _reasons(world, ES)
    # a failure is told on every object the run touched, the token Secrets too
    assert _reasons(world, ObjectRef("Secret", "shop", "cart-config-token"))[-1] == \
        "RotationFailed"


def test_a_rollback_says_rolled_back(world: World, tmp_path: Path) -> None:
    report = run(world, tmp_path)
    world.kube.kube_events.clear()
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    rolled = [e for e in world.kube.kube_events if e.reason == "RolledBack"]
    assert {e.involved for e in rolled} >= {ES, CART}
    assert all(rb.run_id in e.message and report.run_id in e.message for e in rolled)


def test_events_that_cannot_be_created_do_not_fail_the_run(
        world: World, tmp_path: Path) -> None:
    world.kube.faults.arm("create_event", ForbiddenError("kubernetes", "create event",
                                                         "not allowed", status=403), times=-1)
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    assert report.extra["events"]["created"] == 0 and report.extra["events"]["failed"] > 10
    end = [r for r in journal_lines(tmp_path, report.run_id) if r["event"] == "run.end"]
    assert end[-1]["data"]["events"] == report.extra["events"]


def test_a_slow_event_request_never_holds_up_a_step(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every event request blocks until config.write starts, which comes four steps after
    # the first event.  Sent inline, the first one would time out its wait (and the run
    # would crawl); queued to the sender thread, the steps go on and release them.
    release = threading.Event()
    timed_out: list[str] = []
    sent_at: dict[str, float] = {}
    create = world.kube.create_event

    def slow_create(event: KubeEvent) -> None:
        if not release.wait(timeout=5):
            timed_out.append(event.reason)
        sent_at[event.reason] = time.time()
        create(event)

    released: list[float] = []

    def release_now(_step: PlannedStep) -> None:
        released.append(time.time())
        release.set()
    monkeypatch.setattr(world.kube, "create_event", slow_create)
    obs = RecordingObserver()
    obs.on_start["config.write"] = release_now
    started = time.time()
    report = run(world, tmp_path, obs)
    assert report.status == "succeeded", report.message
    assert timed_out == []
    # a queued event carries the time it happened, not the time it was sent
    written = next(e for e in world.kube.kube_events if e.reason == "BackendWritten")
    assert written.at is not None
    assert started <= written.at.timestamp() < released[0] <= sent_at["BackendWritten"]
    assert report.extra["events"] == {"created": len(world.kube.kube_events), "failed": 0}
    # one sender thread per object: the steps' events keep their order on each object
    assert _reasons(world, ES) == ["BackendWritten", "SyncRequested", "CredentialRotated"]
    assert _reasons(world, CART) == ["ConfigWritten", "RolloutRestarted", "TokensRevoked",
                                     "CredentialRotated"]


def test_one_event_request_at_a_time_while_steps_run_several_once_the_run_ends(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each request lingers (up to 20 ms, less once another one is in flight) so that lanes
    # sending at once would be seen.  While steps run the API server is busy with the
    # rollouts the run waits for: one request at a time.  At the end, several.
    cond = threading.Condition()
    state = {"inflight": 0, "ending": False}
    most = {"running": 0, "ending": 0}
    create = world.kube.create_event

    def create_event(event: KubeEvent) -> None:
        with cond:
            state["inflight"] += 1
            phase = "ending" if state["ending"] else "running"
            most[phase] = max(most[phase], state["inflight"])
            cond.notify_all()
            cond.wait_for(lambda: state["inflight"] > 1, timeout=0.02)
            most[phase] = max(most[phase], state["inflight"])
        try:
            create(event)
        finally:
            with cond:
                state["inflight"] -= 1

    run_end = events_mod.RunEvents.run_end

    def ending(self: events_mod.RunEvents, status: str, message: str = "") -> None:
        with cond:
            state["ending"] = True
        run_end(self, status, message)

    monkeypatch.setattr(world.kube, "create_event", create_event)
    monkeypatch.setattr(events_mod.RunEvents, "run_end", ending)
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    assert most["running"] == 1
    assert most["ending"] >= 2
    assert report.extra["events"] == {"created": len(world.kube.kube_events), "failed": 0}
    assert _reasons(world, ES) == ["BackendWritten", "SyncRequested", "CredentialRotated"]
    assert _reasons(world, CART) == ["ConfigWritten", "RolloutRestarted", "TokensRevoked",
                                     "CredentialRotated"]


def test_events_still_unsent_at_the_end_count_as_failed(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = threading.Event()
    monkeypatch.setattr(events_mod, "FLUSH_SECONDS", 0.3)
    monkeypatch.setattr(world.kube, "create_event", lambda _event: stuck.wait(timeout=10))
    try:
        report = run(world, tmp_path)
    finally:
        stuck.set()
    assert report.status == "succeeded", report.message
    assert report.extra["events"]["created"] == 0 and report.extra["events"]["failed"] > 10


def test_objects_preflight_read_are_not_read_again_for_their_events(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each event names its object's uid.  Preflight already read every workload and the
    # ExternalSecret: their uids come from there, not from a GET per object on the event
    # sender (at 100 consumers, 100 requests queued behind a saturated API server).
    reads: list[tuple[str, str]] = []
    get = world.kube.get

    def counting_get(kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        if threading.current_thread().name.startswith("rotate-event"):
            reads.append((kind, name))
        return get(kind, namespace, name)

    monkeypatch.setattr(world.kube, "get", counting_get)
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    assert not [r for r in reads if r[0] in ("Deployment", "ExternalSecret")], reads
    assert [k for k, _ in reads] and {k for k, _ in reads} == {"Secret"}  # the rest still read
    cart = world.kube.raw("Deployment", "shop", "cart")["metadata"]["uid"]
    assert {e.uid for e in world.kube.kube_events if e.involved == CART} == {cart}
    es = world.kube.raw("ExternalSecret", "dragonfly", "dragonfly-password")["metadata"]["uid"]
    assert {e.uid for e in world.kube.kube_events if e.involved == ES} == {es}


def test_a_consumer_is_told_rotated_as_soon_as_its_own_steps_are_done(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # user's readyz check is held until cart's CredentialRotated event has been created: sent
    # only at the run's end, it would come after user's check, and the hold would run out.
    told = threading.Event()
    create = world.kube.create_event

    def create_event(event: KubeEvent) -> None:
        create(event)
        if event.involved == CART and event.reason == "CredentialRotated":
            told.set()

    released: list[bool] = []

    def hold(step: PlannedStep) -> None:
        if step.subject == "user":
            released.append(told.wait(timeout=5))
    monkeypatch.setattr(world.kube, "create_event", create_event)
    obs = RecordingObserver()
    obs.on_start["readyz.check"] = hold
    report = run(world, tmp_path, obs)
    assert report.status == "succeeded", report.message
    assert released == [True]
    # once each: the run's end does not tell a consumer again
    assert _reasons(world, CART).count("CredentialRotated") == 1
    assert _reasons(world, ES) == ["BackendWritten", "SyncRequested", "CredentialRotated"]


def test_the_undo_of_a_prepared_consumer_is_told_on_its_workload(
        world: World, tmp_path: Path) -> None:
    """A provider that never comes back: the run puts each prepared consumer back — its
    document, its pod template — and each of those changes is a Normal event naming the run."""
    world.stuck.add("dragonfly")
    report = run(world, tmp_path, timeout=0.4)
    assert (report.status, report.exit_code) == ("failed", 12)
    assert _reasons(world, CART) == ["ConfigWritten", "RolloutRestarted", "ConfigUndone",
                                     "RolloutUndone", "RotationFailed"]
    undone = [e for e in world.kube.kube_events if e.reason.endswith("Undone")]
    assert {(e.type, e.action) for e in undone} == {("Normal", "config.undo"),
                                                     ("Normal", "consumer.undo")}
    assert all(report.run_id in e.message for e in undone)
