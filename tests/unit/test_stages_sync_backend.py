"""Stage ① backend and ② sync against the fakes."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from rotate.core.errors import ConflictError, PermanentError
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, WaitTimeout
from rotate.stages import backend, sync
from tests.fakes import FakeKube, FakeVault

NEW = "new-value-0123456789abcdefghijklmnopqrstu"


def test_backend_write_keeps_other_keys_and_marks_the_run() -> None:
    v = FakeVault()
    v.versions["p"] = [{"password": "a", "username": "u"}]
    w = backend.write(v, "p", "password", Secret(NEW), "run-1", expected_version=1)
    assert (w.previous_version, w.version) == (1, 2)
    assert v.versions["p"][-1] == {"password": NEW, "username": "u"}
    assert v.custom["p"] == {"rotate-run-id": "run-1", "rotate-cas": "1", "rotate-version": "2"}
    assert backend.observe(v, "p", "run-1", 1) == 2
    assert backend.observe(v, "p", "run-2", 1) is None


def test_backend_refuses_when_version_moved() -> None:
    v = FakeVault()
    v.versions["p"] = [{"password": "a"}, {"password": "b"}]
    with pytest.raises(ConflictError):
        backend.write(v, "p", "password", Secret(NEW), "run-1", expected_version=1)
    assert len(v.versions["p"]) == 2


def test_backend_restore_writes_old_data_as_new_version() -> None:
    v = FakeVault()
    v.versions["p"] = [{"password": "a", "u": "x"}, {"password": "b", "u": "x"}]
    w = backend.restore(v, "p", "password", 1, "rb-1")
    assert w.version == 3 and v.versions["p"][2] == {"password": "a", "u": "x"}


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    k = FakeKube()
    k.put({"kind": "ExternalSecret", "metadata": {"name": "es", "namespace": "ns"},
           "spec": {}, "status": {}})
    k.put({"kind": "Secret", "metadata": {"name": "s", "namespace": "ns"},
           "data": {"k": base64.b64encode(b"OLD-VALUE-xyz").decode()}})
    yield k
    k.close()


def _status(kube: FakeKube, *, refresh: datetime, ready: str = "True",
            reason: str = "SecretSynced", value: str | None = None) -> None:
    if value is not None:
        kube.write_secret_key("ns", "s", "k", Secret(value))
    kube.set_status("ExternalSecret", "ns", "es", {
        "conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": "m"}],
        "refreshTime": refresh.strftime("%Y-%m-%dT%H:%M:%SZ")})


def _wait(kube: FakeKube, since: datetime, timeout: float = 0.3) -> sync.SyncProof:
    return sync.wait(kube, ("ns", "es"), ("ns", "s", "k"), Secret(NEW), since,
                     deadline=Deadline.after(timeout))


def test_trigger_sets_force_sync_annotation(kube: FakeKube) -> None:
    t1 = sync.trigger(kube, "ns", "es", "run-1")
    t2 = sync.trigger(kube, "ns", "es", "run-1")
    assert t1.stamp.startswith("run-1.") and t1.stamp != t2.stamp
    ann = kube.raw("ExternalSecret", "ns", "es")["metadata"]["annotations"]
    assert ann["force-sync"] == t2.stamp


def test_sync_proof_needs_all_three(kube: FakeKube) -> None:
    since = datetime.now(UTC)
    # Ready alone, with a stale refreshTime and the old value: not enough
    _status(kube, refresh=since - timedelta(minutes=5))
    with pytest.raises(WaitTimeout) as exc:
        _wait(kube, since)
    assert "refreshTime" in exc.value.last
    # fresh refreshTime but the Secret still holds the old value: not enough
    _status(kube, refresh=since)
    with pytest.raises(WaitTimeout) as exc:
        _wait(kube, since)
    assert "does not hold the new value" in exc.value.last
    assert NEW not in exc.value.message and "OLD-VALUE-xyz" not in exc.value.message
    # the right value but a stale refreshTime: still not enough
    _status(kube, refresh=since - timedelta(seconds=2), value=NEW)
    with pytest.raises(WaitTimeout):
        _wait(kube, since)
    # a refreshTime in the same second as the trigger counts (ESO has second precision)
    _status(kube, refresh=since.replace(microsecond=0))
    proof = _wait(kube, since)
    assert proof.refresh_time == since.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_watch_pause_wakes_on_an_event_not_the_interval(kube: FakeKube) -> None:
    import time

    from rotate.core.waiting import wait_for
    from rotate.stages.kubewatch import WatchPause

    with WatchPause(kube, "ExternalSecret", "ns", "es") as pause:
        wait_for(lambda: kube.watches_started > 0 or None, deadline=Deadline.after(5),
                 what="watch started")
        kube.patch("ExternalSecret", "ns", "es", {"metadata": {"labels": {"x": "1"}}})
        t0 = time.monotonic()
        pause(30)
        assert time.monotonic() - t0 < 5


def test_watch_pause_hands_the_newest_watched_object_once(kube: FakeKube) -> None:
    """wait_rollout judges the object its named watch delivered instead of a GET per event."""
    from rotate.core.waiting import wait_for
    from rotate.stages.kubewatch import WatchPause

    with WatchPause(kube, "ExternalSecret", "ns", "es") as pause:
        wait_for(lambda: kube.watches_started > 0 or None, deadline=Deadline.after(5),
                 what="watch started")
        assert pause.take() is None
        for n in ("1", "2"):
            kube.patch("ExternalSecret", "ns", "es", {"metadata": {"labels": {"x": n}}})
        taken: list[str] = []

        def newest() -> bool | None:
            obj = pause.take()
            if obj is not None:
                taken.append(obj["metadata"]["labels"]["x"])
            return (taken[-1:] == ["2"]) or None

        wait_for(newest, deadline=Deadline.after(5), what="the newest object taken")
        assert pause.take() is None


def test_sync_error_condition_fails_at_once_with_eso_message(kube: FakeKube) -> None:
    kube.set_status("ExternalSecret", "ns", "es", {"conditions": [
        {"type": "Ready", "status": "False", "reason": "SecretSyncedError",
         "message": "could not get secret data from provider"}]})
    with pytest.raises(PermanentError) as exc:
        _wait(kube, datetime.now(UTC), timeout=30)
    assert "SecretSyncedError" in exc.value.message
    assert "could not get secret data from provider" in exc.value.message


def test_trigger_time_follows_the_api_server_clock(kube: FakeKube) -> None:
    # The cluster's clock is 10 minutes behind ours: ESO's refreshTime is in its clock.
    behind = datetime.now(UTC) - timedelta(minutes=10)
    kube.raw("ExternalSecret", "ns", "es")["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Update",
         "time": behind.strftime("%Y-%m-%dT%H:%M:%SZ")}]
    trig = sync.trigger(kube, "ns", "es", "run-1")
    assert abs((trig.at - behind).total_seconds()) < 1
    _status(kube, refresh=behind, value=NEW)
    assert _wait(kube, trig.at).refresh_time
