"""The run's watched copy of a namespace's objects (rotate.stages.kubecache) on the fake kube:
events applied in order, a re-list after a watch ERROR or a failed list, readers woken by a
change, close ending the thread; and wait_staged served by one shared copy."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from rotate.clients.seams import WatchEvent
from rotate.core.errors import ForbiddenError, TemporaryError
from rotate.core.refs import ObjectRef
from rotate.core.waiting import Deadline
from rotate.stages import kubecache
from rotate.stages.kubecache import KubeCaches, ObjectCache
from rotate.stages.rollout import RESTARTED_AT
from rotate.stages.staged import wait_staged
from tests.fakes import FakeKube
from tests.support.polling import eventually

STAMP = "2026-12-03T12:00:00.123456Z"


class ExpiringKube(FakeKube):
    """A fake whose next ``expire`` watches answer a 410 ERROR event at once."""

    expire = 0

    def watch(self, kind: str, namespace: str | None, **kw: Any) -> Iterator[WatchEvent]:
        if self.expire:
            self.expire -= 1
            return iter([WatchEvent("ERROR", {"code": 410, "reason": "Expired"})])
        return super().watch(kind, namespace, **kw)


@pytest.fixture(autouse=True)
def fast_relist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubecache, "_RELIST_PAUSE", 0.01)


@pytest.fixture
def kube() -> Iterator[ExpiringKube]:
    fake = ExpiringKube()
    yield fake
    fake.close()


def pod(name: str, *, app: str = "cart", started: bool = False,
        stamp: str = STAMP) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "shop", "labels": {"app": app},
                                        "annotations": {RESTARTED_AT: stamp}},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "c", "started": started, "ready": False}]}}


def names(cache: ObjectCache, labels: dict[str, str] | None = None) -> list[str]:
    return sorted(str(o["metadata"]["name"]) for o in cache.objects(labels))


def synced(cache: ObjectCache) -> list[str] | None:
    try:
        return names(cache)
    except TemporaryError:
        return None


@pytest.fixture
def cache(kube: ExpiringKube) -> Iterator[ObjectCache]:
    c = ObjectCache(kube, "Pod", "shop", server_timeout=0.2)
    yield c
    c.close()


def test_adds_modifies_and_deletes_follow_the_watch_in_order(
        kube: ExpiringKube, cache: ObjectCache) -> None:
    kube.put(pod("a"))
    kube.put({**pod("other"), "metadata": {"name": "other", "namespace": "db"}})
    eventually(lambda: synced(cache) == ["a"], 5, "the first list")
    kube.create("Pod", "shop", pod("b", app="order"))
    eventually(lambda: names(cache) == ["a", "b"], 5, "the ADDED pod")
    assert names(cache, {"app": "order"}) == ["b"]
    kube.set_status("Pod", "shop", "a", {"phase": "Succeeded"})
    eventually(lambda: cache.objects({"app": "cart"})[0]["status"]["phase"] == "Succeeded", 5,
               "the MODIFIED pod")
    kube.delete("Pod", "shop", "a")
    eventually(lambda: names(cache) == ["b"], 5, "the DELETED pod gone")
    assert kube.faults.calls["list"] == 1  # one list, then only the watch


def test_a_410_error_event_relists_and_bumps_the_version(kube: ExpiringKube) -> None:
    kube.put(pod("a"))
    kube.expire = 2
    cache = ObjectCache(kube, "Pod", "shop", server_timeout=0.2)
    try:
        eventually(lambda: kube.faults.calls.get("list", 0) >= 3, 5, "a re-list per ERROR")
        before = cache.version
        kube.create("Pod", "shop", pod("b"))
        eventually(lambda: synced(cache) == ["a", "b"], 5, "the copy current again")
        assert cache.version > before
    finally:
        cache.close()


def test_a_failed_list_is_raised_to_readers_until_a_relist_succeeds(
        kube: ExpiringKube) -> None:
    kube.put(pod("a"))
    kube.faults.arm("list", ForbiddenError("kubernetes", "list pod shop", "forbidden",
                                           status=403), times=-1)
    cache = ObjectCache(kube, "Pod", "shop", server_timeout=0.2)
    try:
        eventually(lambda: kube.faults.calls.get("list", 0) >= 1, 5, "the first list")

        def refused() -> bool:
            try:
                cache.objects()
            except ForbiddenError:
                return True
            except TemporaryError:
                return False  # the list is still under way
            return False

        eventually(refused, 5, "the list's error raised to a reader")
        kube.faults.clear()
        eventually(lambda: synced(cache) == ["a"], 5, "the re-list after the failure")
    finally:
        cache.close()


def test_a_watch_failure_relists(kube: ExpiringKube, cache: ObjectCache) -> None:
    eventually(lambda: synced(cache) == [], 5, "the first list")
    kube.faults.arm("watch", TemporaryError("kubernetes", "watch pod shop", "reset"))
    kube.create("Pod", "shop", pod("a"))
    eventually(lambda: kube.faults.calls.get("list", 0) >= 2, 5, "a re-list")
    eventually(lambda: synced(cache) == ["a"], 5, "the copy current again")


def test_a_reader_pause_returns_when_the_copy_changed_since_it_read(
        kube: ExpiringKube, cache: ObjectCache) -> None:
    eventually(lambda: synced(cache) == [], 5, "the first list")
    reader = cache.reader()
    assert reader.objects() == []
    woke = threading.Event()

    def wait() -> None:
        reader(30)
        woke.set()

    threading.Thread(target=wait, daemon=True).start()
    kube.create("Pod", "shop", pod("a"))
    assert woke.wait(5), "the pause did not return on a change"
    # it has not read since: a second pause returns at once
    reader(30)
    assert [o["metadata"]["name"] for o in reader.objects()] == ["a"]


def test_close_stops_the_thread_and_wakes_readers(kube: ExpiringKube) -> None:
    cache = ObjectCache(kube, "Pod", "shop", server_timeout=0.2)
    eventually(lambda: synced(cache) == [], 5, "the first list")
    reader = cache.reader()
    reader.objects()
    cache.close()
    reader(30)  # returns at once: closed
    eventually(lambda: not cache.running, 5, "the thread ended")


def test_the_run_has_one_cache_per_kind_and_namespace_until_closed(kube: ExpiringKube) -> None:
    caches = KubeCaches(kube, server_timeout=0.2)
    shop = caches.of("Pod", "shop")
    assert caches.of("Pod", "shop") is shop and caches.of("Pod", "db") is not shop
    caches.close()
    eventually(lambda: not shop.running, 5, "the cache's thread ended")
    with pytest.raises(RuntimeError):
        caches.of("Pod", "shop")


def test_waiters_share_one_list_and_each_sees_its_own_pods(kube: ExpiringKube,
                                                          cache: ObjectCache) -> None:
    apps = ["cart", "order", "user"]
    for app in apps:
        kube.put({"kind": "Deployment", "metadata": {"name": app, "namespace": "shop"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": app}}}})
    done: dict[str, str] = {}

    def wait(app: str) -> None:
        done[app] = wait_staged(kube, ObjectRef("Deployment", "shop", app), STAMP,
                                deadline=Deadline.after(10), pods=cache)

    threads = [threading.Thread(target=wait, args=(app,), daemon=True) for app in apps]
    for t in threads:
        t.start()
    for app in apps:
        kube.create("Pod", "shop", pod(f"{app}-old", app=app, started=True, stamp="before"))
        kube.create("Pod", "shop", pod(f"{app}-new", app=app))
    for app in apps:
        kube.set_status("Pod", "shop", f"{app}-new", pod("x", started=True)["status"])
    for t in threads:
        t.join(10)
    assert done == {app: "1 new pod(s) started" for app in apps}
    assert kube.faults.calls["list"] == 1
    assert kube.faults.calls["get"] == len(apps)  # each Deployment read once


def test_a_thread_dead_of_a_bug_leaves_readers_reading_the_server(
        kube: ExpiringKube, monkeypatch: pytest.MonkeyPatch) -> None:
    died: list[type[BaseException]] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_type))

    def buggy_watch(*args: Any, **kwargs: Any) -> Iterator[WatchEvent]:
        raise RuntimeError("a bug")

    kube.watch = buggy_watch  # type: ignore[method-assign]
    kube.put(pod("a"))
    cache = ObjectCache(kube, "Pod", "shop", server_timeout=0.2)
    try:
        eventually(lambda: not cache.running, 5, "the thread dead of the bug")
        assert died == [RuntimeError]
        kube.create("Pod", "shop", pod("b"))
        assert names(cache) == ["a", "b"]  # listed at the read, not from the dead copy
    finally:
        cache.close()
