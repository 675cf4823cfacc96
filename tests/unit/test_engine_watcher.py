"""``rotate watch``'s decisions (rotate.engine.watcher), its leader election
(rotate.engine.leadership) and the watcher's extra RBAC (rotate.engine.access): pure logic
and the Kube fake.  The real thing — kopf against the lab's API server, two replicas, a
leader killed mid-run — is tests/e2e/test_watch.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import cast

import pytest

from rotate.core.timestamps import rfc3339, utcnow
from rotate.engine.access import watch_permissions
from rotate.engine.journal import RunState
from rotate.engine.leadership import LEASE_NAME, Leadership, expired
from rotate.engine.watcher import (
    LockState,
    Watcher,
    command_for,
    decide,
    targets_of,
)
from rotate.engine.wiring import load_chain
from tests.fakes.kube import FakeKube
from tests.support.paths import EXAMPLE_CHAIN
from tests.support.polling import eventually

FREE, HELD = LockState(False, True), LockState(True, False, "root@host/RUN")
GONE = LockState(True, True, "root@host/RUN")


def run_state(status: str, *, adopted: int | None = 7, run_id: str = "RUN") -> RunState:
    """A stand-in with what the decision reads: status, start.adopted, the steps."""
    return cast(RunState, SimpleNamespace(
        run_id=run_id, status=status, operation="rotate", steps=[],
        start=SimpleNamespace(adopted=adopted, credentials=("dragonfly",))))


def test_a_run_in_flight_is_waited_for_whatever_the_backend_holds() -> None:
    assert decide("dragonfly", HELD, run_state("running"), (8, 7)).kind == "wait"
    assert decide("dragonfly", HELD, None, (8, 7)).kind == "wait"


def test_an_adopt_run_whose_holder_is_gone_is_resumed_taking_its_lock_over() -> None:
    for status in ("running", "interrupted"):
        action = decide("dragonfly", GONE, run_state(status), (8, 7))
        assert (action.kind, action.run_id, action.take_over) == ("resume", "RUN", True)
        assert command_for(action) == ["resume", "RUN", "--confirm", "--take-over-lock"]
    released = decide("dragonfly", FREE, run_state("interrupted"), (8, 7))
    assert command_for(released) == ["resume", "RUN", "--confirm"]


def test_a_failed_run_or_an_operators_rotation_is_left_to_a_person() -> None:
    for state in (run_state("failed"), run_state("interrupted", adopted=None)):
        action = decide("dragonfly", FREE, state, (8, 7))
        assert action.kind == "nothing" and command_for(action) == []
        assert "`rotate resume RUN --confirm`" in action.why
        assert "`rotate rollback RUN --confirm`" in action.why


def test_a_version_rotate_did_not_write_is_adopted_and_the_chains_own_is_not() -> None:
    adopt = decide("dragonfly", FREE, None, (8, 7))
    assert adopt.kind == "adopt" and "v8" in adopt.why and "v7" in adopt.why
    assert command_for(adopt) == ["dragonfly", "--adopt", "--confirm"]
    assert command_for(decide("dragonfly", GONE, None, (8, 7)))[-1] == "--take-over-lock"
    assert decide("dragonfly", FREE, None, (7, 7)).kind == "nothing"
    unread = decide("dragonfly", FREE, None, None, "the backend could not be read (x)")
    assert (unread.kind, unread.why) == ("nothing", "the backend could not be read (x)")


def test_each_target_secret_names_its_credentials() -> None:
    chain = load_chain(EXAMPLE_CHAIN)
    targets = targets_of(chain)
    assert targets[("dragonfly", "dragonfly-password-secret")] == ("dragonfly",)
    assert sorted(c for cs in targets.values() for c in cs) == sorted(chain.credentials)
    assert list(targets_of(chain, ["dragonfly"]).values()) == [("dragonfly",)]


def test_the_watchers_rbac_lists_and_watches_secrets_where_its_targets_are() -> None:
    chain = load_chain(EXAMPLE_CHAIN)
    perms = {(p.verb, p.kind, p.namespace, p.name)
             for p in watch_permissions(chain, [chain.credential("dragonfly")])}
    assert perms == {("list", "Secret", "dragonfly", None), ("watch", "Secret", "dragonfly", None),
                     ("create", "Lease", "rotate-system", None),
                     ("get", "Lease", "rotate-system", LEASE_NAME),
                     ("update", "Lease", "rotate-system", LEASE_NAME)}


# ---------------------------------------------------------------------------- leadership


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


def holder(kube: FakeKube) -> str:
    return str(kube.get("Lease", "rotate-system", LEASE_NAME)["spec"].get("holderIdentity", ""))


def test_one_replica_leads_and_the_other_takes_over_only_once_the_lease_expired(
        kube: FakeKube) -> None:
    a = Leadership(kube, "rotate-system", duration=10, holder="pod-a/1")
    b = Leadership(kube, "rotate-system", duration=10, holder="pod-b/2")
    assert a.step() and a.leading and holder(kube) == "pod-a/1"
    assert not b.step() and not b.leading and b.leader == "pod-a/1"
    assert a.step()  # renewed
    lease = kube.get("Lease", "rotate-system", LEASE_NAME)
    lease["spec"]["renewTime"] = rfc3339(utcnow() - timedelta(seconds=11))
    kube.replace("Lease", "rotate-system", LEASE_NAME, lease)
    assert expired(kube.get("Lease", "rotate-system", LEASE_NAME))
    assert b.step() and holder(kube) == "pod-b/2"
    assert kube.get("Lease", "rotate-system", LEASE_NAME)["spec"]["leaseTransitions"] == 1
    assert not a.step() and not a.leading  # it lost: it stops acting at once


def test_a_leader_stopping_gives_the_lease_up_at_once(kube: FakeKube) -> None:
    a = Leadership(kube, "rotate-system", duration=10, holder="pod-a/1")
    b = Leadership(kube, "rotate-system", duration=10, holder="pod-b/2")
    assert a.step()
    a.release()
    assert not a.leading and holder(kube) == ""
    assert b.step()


# ---------------------------------------------------------------------------- the loop


class Observed:
    def __init__(self) -> None:
        self.lock_state = FREE
        self.open: RunState | None = None
        self.current = (8, 7)

    def lock(self, credential: str) -> LockState:
        return self.lock_state

    def open_run(self, credential: str) -> RunState | None:
        return self.open

    def versions(self, credential: str) -> tuple[tuple[int, int] | None, str]:
        return self.current, ""


class Ran:
    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def run(self, args: list[str]) -> int:
        self.commands.append(args)
        return 0


class Counted:
    def __init__(self) -> None:
        self.acts: list[tuple[str, str, int]] = []
        self.lead: list[bool] = []

    def changed(self) -> None:
        pass

    def acted(self, action: str, credential: str, code: int) -> None:
        self.acts.append((action, credential, code))

    def leading(self, leading: bool) -> None:
        self.lead.append(leading)


@pytest.fixture
def running(kube: FakeKube) -> Iterator[tuple[Watcher, Observed, Ran, Counted]]:
    observed, ran, counted = Observed(), Ran(), Counted()
    observed.current = (7, 7)  # nothing to adopt until a test says so
    leader = Leadership(kube, "rotate-system", duration=3, holder="pod-a/1")
    watcher = Watcher({("dragonfly", "dragonfly-password-secret"): ("dragonfly",)}, observed,
                      ran, leader, counted, lambda _text: None, resync=600, retry=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    eventually(lambda: counted.lead == [True] or None, 10, "the replica to lead")
    yield watcher, observed, ran, counted
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_a_target_secret_change_adopts_and_another_secret_does_nothing(
        running: tuple[Watcher, Observed, Ran, Counted]) -> None:
    watcher, observed, ran, counted = running
    observed.current = (8, 7)
    watcher.changed("shop", "unrelated")
    watcher.changed("dragonfly", "dragonfly-password-secret")
    eventually(lambda: ran.commands or None, 10, "the adopt run")
    assert ran.commands == [["dragonfly", "--adopt", "--confirm"]]
    assert counted.acts == [("adopt", "dragonfly", 0)]


def test_a_run_in_flight_is_looked_at_again_until_its_lock_is_free(
        running: tuple[Watcher, Observed, Ran, Counted]) -> None:
    watcher, observed, ran, _ = running
    observed.lock_state, observed.open = HELD, run_state("running")
    watcher.changed("dragonfly", "dragonfly-password-secret")
    observed.lock_state = GONE  # its holder killed: the retry resumes it
    eventually(lambda: ran.commands or None, 10, "the resume")
    assert ran.commands[0] == ["resume", "RUN", "--confirm", "--take-over-lock"]


def test_a_replica_that_does_not_lead_acts_on_nothing(kube: FakeKube) -> None:
    Leadership(kube, "rotate-system", duration=30, holder="pod-b/2").step()
    observed, ran, counted = Observed(), Ran(), Counted()
    watcher = Watcher({("dragonfly", "dragonfly-password-secret"): ("dragonfly",)}, observed,
                      ran, Leadership(kube, "rotate-system", duration=3, holder="pod-a/1"),
                      counted, lambda _text: None, resync=600, retry=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    since = time.monotonic()
    watcher.changed("dragonfly", "dragonfly-password-secret")
    try:
        # the pending look is retried (every 0.05 s) while another replica leads: a few
        # passes of the loop later, still nothing run
        eventually(lambda: watcher.beat > since + 0.3 or None, 10, "passes of the loop")
    finally:
        stop.set()
        thread.join(timeout=10)
    assert ran.commands == [] and counted.lead == []


def test_what_is_due_is_rotated_as_one_run_unless_one_has_a_run_in_flight(
        kube: FakeKube) -> None:
    observed, ran, counted = Observed(), Ran(), Counted()
    observed.current = (7, 7)
    observed.lock_state = HELD
    watcher = Watcher({("dragonfly", "dragonfly-password-secret"): ("dragonfly",),
                       ("db", "postgres-password-secret"): ("postgres",)}, observed, ran,
                      Leadership(kube, "rotate-system", duration=3, holder="pod-a/1"),
                      counted, lambda _text: None, resync=0.1, retry=0.05,
                      due=lambda: ["dragonfly", "postgres"])
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        eventually(lambda: counted.lead == [True] or None, 10, "the replica to lead")
        since = time.monotonic()
        eventually(lambda: watcher.beat > since + 0.3 or None, 10, "a few resyncs")
        assert ran.commands == []  # a run holds dragonfly's lock: nothing due is started
        observed.lock_state = FREE
        eventually(lambda: ran.commands or None, 10, "the due run")
    finally:
        stop.set()
        thread.join(timeout=10)
    assert ran.commands[0] == ["due", "dragonfly", "postgres", "--confirm"]
    assert ("due", "dragonfly+postgres", 0) in counted.acts


def test_a_run_lock_is_free_when_absent_expired_or_its_holder_gone_from_this_host(
        kube: FakeKube) -> None:
    from rotate.engine.lock import Lease
    from rotate.engine.watch_service import ChainObserver

    chain = load_chain(EXAMPLE_CHAIN)
    observer = ChainObserver(chain, kube, lambda: None, lambda: None)  # type: ignore[arg-type,return-value]
    assert observer.lock("dragonfly") == LockState(False, True)
    held = Lease(kube, "rotate-system", "dragonfly", "root@host/RUN", duration=30)
    held.acquire(renew=False)
    assert observer.lock("dragonfly") == LockState(True, False, "root@host/RUN")
    lease = kube.get("Lease", "rotate-system", "rotate-dragonfly")
    lease["spec"]["renewTime"] = rfc3339(utcnow() - timedelta(seconds=31))
    kube.replace("Lease", "rotate-system", "rotate-dragonfly", lease)
    assert observer.lock("dragonfly").free  # expired
    lease = kube.get("Lease", "rotate-system", "rotate-dragonfly")
    lease["spec"]["renewTime"] = rfc3339(utcnow())
    lease["metadata"]["annotations"]["rotate.dev/pid"] = "999999999"  # no such process here
    kube.replace("Lease", "rotate-system", "rotate-dragonfly", lease)
    assert observer.lock("dragonfly").free
