"""The in-memory store, patch formats and selectors (no network)."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pytest
from rotate_lab.cluster.api import store as store_mod
from rotate_lab.cluster.api.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from rotate_lab.cluster.api.selectors import parse_field_selector, parse_label_selector
from rotate_lab.cluster.api.store import ApiError, Store


def deployment(name: str = "web", ns: str = "default", **labels: str) -> dict[str, Any]:
    lab = {"app": name, **labels}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": lab},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": lab},
                              "spec": {"containers": [{"name": "c", "image": "shop:1"}]}}},
    }


def test_create_sets_metadata_and_global_rv() -> None:
    s = Store()
    a = s.create("Deployment", deployment("a"))
    b = s.create("ConfigMap", {"metadata": {"name": "b", "namespace": "default"}})
    assert a["metadata"]["uid"] and a["metadata"]["creationTimestamp"].endswith("Z")
    assert a["metadata"]["generation"] == 1
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    assert a["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == "25%"
    with pytest.raises(ApiError) as e:
        s.create("Deployment", deployment("a"))
    assert (e.value.code, e.value.reason) == (409, "AlreadyExists")
    gen = s.create("ConfigMap", {"metadata": {"generateName": "x-", "namespace": "default"}})
    assert gen["metadata"]["name"].startswith("x-") and len(gen["metadata"]["name"]) == 7


def test_get_is_a_copy_and_not_found_is_a_status() -> None:
    s = Store()
    s.create("ConfigMap", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    got = s.get("ConfigMap", "default", "c")
    got["data"]["k"] = "changed"
    assert s.get("ConfigMap", "default", "c")["data"]["k"] == "v"
    with pytest.raises(ApiError) as e:
        s.get("Deployment", "default", "nope")
    assert e.value.code == 404 and e.value.status()["details"] == {
        "name": "nope", "kind": "deployments", "group": "apps"}
    assert 'deployments.apps "nope" not found' in e.value.message


def test_missing_namespace_is_404_and_invalid_is_422_without_change() -> None:
    s = Store()
    rv = s.resource_version
    with pytest.raises(ApiError) as e:
        s.create("ConfigMap", {"metadata": {"name": "c", "namespace": "ghost"}})
    assert e.value.code == 404
    bad = deployment("d")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiError) as e:
        s.create("Deployment", bad)
    assert e.value.code == 422 and e.value.reason == "Invalid"
    assert e.value.details is not None
    assert e.value.details["causes"][0]["field"] == "spec.template.metadata.labels"
    with pytest.raises(ApiError) as e:
        s.create("ConfigMap", {"metadata": {}})
    assert e.value.code == 422 and "metadata.name" in e.value.message
    assert s.resource_version == rv


def test_update_conflict_generation_and_status_rules() -> None:
    s = Store()
    d = s.create("Deployment", deployment())
    stale = dict(d)
    d["metadata"]["annotations"] = {"a": "1"}
    d2 = s.update("Deployment", d)
    assert d2["metadata"]["generation"] == 1  # metadata only
    with pytest.raises(ApiError) as e:
        s.update("Deployment", stale)
    assert (e.value.code, e.value.reason) == (409, "Conflict")
    d2["spec"]["replicas"] = 3
    d2["status"] = {"replicas": 99}  # ignored on the main resource
    d3 = s.update("Deployment", d2)
    assert d3["metadata"]["generation"] == 2 and d3["status"] == {}
    d3["status"] = {"observedGeneration": 2}
    d3["spec"]["replicas"] = 7  # ignored on the status subresource
    d4 = s.update("Deployment", d3, subresource="status")
    assert d4["status"] == {"observedGeneration": 2} and d4["spec"]["replicas"] == 3
    assert d4["metadata"]["generation"] == 2
    # a no-op write takes no resourceVersion
    assert s.update("Deployment", d4)["metadata"]["resourceVersion"] == (
        d4["metadata"]["resourceVersion"])


def test_patch_types_and_mutate() -> None:
    s = Store()
    s.create("Deployment", deployment())
    restarted = s.patch("Deployment", "default", "web", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}, "strategic")
    assert restarted["metadata"]["generation"] == 2
    assert restarted["spec"]["template"]["spec"]["containers"][0]["image"] == "shop:1"
    m = s.patch("Deployment", "default", "web", {"metadata": {"annotations": {"x": "y"}}},
                "merge")
    assert m["metadata"]["annotations"] == {"x": "y"} and m["metadata"]["generation"] == 2
    j = s.patch("Deployment", "default", "web",
                [{"op": "test", "path": "/spec/replicas", "value": 2},
                 {"op": "replace", "path": "/spec/replicas", "value": 4}], "json")
    assert j["spec"]["replicas"] == 4
    with pytest.raises(ApiError) as e:
        s.patch("Deployment", "default", "web",
                [{"op": "test", "path": "/spec/replicas", "value": 2}], "json")
    assert e.value.code == 422
    out = s.mutate("Deployment", "default", "web",
                   lambda o: o.setdefault("status", {}).update(replicas=4), subresource="status")
    assert out["status"] == {"replicas": 4}


def test_watch_replay_selectors_and_expiry() -> None:
    s = Store()
    s.create("Deployment", deployment("a"))
    rv = s.resource_version
    s.create("Deployment", deployment("b", tier="x"))
    s.patch("Deployment", "default", "a", {"metadata": {"labels": {"tier": "x"}}}, "merge")
    s.delete("Deployment", "default", "b")
    w = s.watch("Deployment", "default", resource_version=rv, label_selector="tier=x")
    seen = [(ev["type"], ev["object"]["metadata"]["name"]) for ev in iter(
        lambda: w.next(0.05), None)]
    assert seen == [("ADDED", "b"), ("ADDED", "a"), ("DELETED", "b")]
    w2 = s.watch("Deployment", field_selector="metadata.name=a")
    first = w2.next(1)
    assert first is not None and first["type"] == "ADDED"
    got: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: got.append(w2.next(5) or {}))
    t.start()
    s.patch("Deployment", "default", "a", {"spec": {"replicas": 5}}, "merge")
    t.join(5)
    assert got and got[0]["type"] == "MODIFIED" and got[0]["object"]["spec"]["replicas"] == 5
    w.close()
    w2.close()
    assert w2.next(0.01) is None


def test_a_bookmark_never_claims_an_event_its_watcher_has_not_been_handed() -> None:
    # A client resumes from a bookmark's resourceVersion.  An event committed after the
    # watch's queue was seen empty but before the bookmark's version was read would be
    # covered by the bookmark yet never sent: lost to a watcher resuming from it (a prepared
    # pod's "started" was, at 100 consumers).  While an event is queued there is no bookmark.
    s = Store()
    s.create("Deployment", deployment("a"))
    w = s.watch("Deployment", "default", resource_version=s.resource_version)
    assert s.bookmark_version(w) == s.resource_version  # nothing queued: all up to now seen
    s.create("Deployment", deployment("b"))
    assert s.bookmark_version(w) is None
    ev = w.next(0)
    assert ev is not None and ev["object"]["metadata"]["name"] == "b"
    assert s.bookmark_version(w) == ev["object"]["metadata"]["resourceVersion"]
    w.close()


def test_watch_too_old_is_410() -> None:
    s = Store()
    s._history = deque(maxlen=3)
    for i in range(6):
        s.create("ConfigMap", {"metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiError) as e:
        s.watch("ConfigMap", resource_version="1")
    assert e.value.code == 410 and e.value.reason == "Expired"


def test_subscribers_cascade_and_events() -> None:
    s = Store()
    seen: list[tuple[str, str, str]] = []
    s.subscribe(lambda t, k, o: seen.append((t, k, o["metadata"]["name"])))
    d = s.create("Deployment", deployment())
    rs = deployment("web-1")
    rs["kind"] = "ReplicaSet"
    rs["metadata"]["ownerReferences"] = [{"uid": d["metadata"]["uid"], "kind": "Deployment",
                                          "name": "web", "apiVersion": "apps/v1"}]
    s.create("ReplicaSet", rs)
    e1 = s.record_event(d, "ScalingReplicaSet", "Scaled up")
    e2 = s.record_event(d, "ScalingReplicaSet", "Scaled up")
    assert e1 and e2 and e2["count"] == 2 and e2["involvedObject"]["name"] == "web"
    s.delete("Deployment", "default", "web")
    assert s.list("ReplicaSet")[0] == []
    assert ("DELETED", "ReplicaSet", "web-1") in seen
    s.create("Namespace", {"metadata": {"name": "shop"}})
    s.create("ConfigMap", {"metadata": {"name": "c", "namespace": "shop"}})
    s.delete("Namespace", None, "shop")
    assert s.list("ConfigMap", "shop")[0] == []


def test_load_manifests_and_secret_string_data() -> None:
    s = Store()
    out = s.load_manifests([
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "p", "namespace": "shop"},
         "stringData": {"password": "hunter2"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    ])
    assert [o["kind"] for o in out] == ["Namespace", "Secret"]
    assert s.get("Secret", "shop", "p")["data"] == {"password": "aHVudGVyMg=="}
    s.load_manifests([{"kind": "Secret", "metadata": {"name": "p", "namespace": "shop"},
                       "data": {"password": "eA=="}}])
    assert s.get("Secret", "shop", "p")["data"] == {"password": "eA=="}


def test_list_with_selectors() -> None:
    s = Store()
    s.create("Deployment", deployment("a", tier="fe"))
    s.create("Deployment", deployment("b", tier="be"))

    def names(sel: str) -> list[str]:
        return [o["metadata"]["name"] for o in s.list("Deployment", label_selector=sel)[0]]

    assert names("tier in (fe, be),app!=b") == ["a"]
    assert names("!tier") == [] and names("tier") == ["a", "b"]
    assert [o["metadata"]["name"] for o in s.list(
        "Deployment", field_selector="metadata.name!=a")[0]] == ["b"]
    with pytest.raises(ApiError) as e:
        s.list("Deployment", label_selector="a in b")
    assert e.value.code == 400


def test_select_copies_only_the_matches_and_inspect_reads_in_place() -> None:
    """The controllers' and RBAC's reads: only what ``where`` picks is copied, in list's
    order; a caller changing its copy changes nothing stored."""
    s = Store()
    s.create("Namespace", {"metadata": {"name": "other"}})
    for name, ns in (("c", "default"), ("a", "default"), ("b", "other")):
        s.create("Deployment", deployment(name, ns))
    seen: list[str] = []

    def pick(obj: dict[str, Any]) -> bool:
        seen.append(obj["metadata"]["name"])
        return obj["metadata"]["name"] != "c"

    picked = s.select("Deployment", "default", pick)
    assert [o["metadata"]["name"] for o in picked] == ["a"] and sorted(seen) == ["a", "c"]
    assert [o["metadata"]["name"] for o in s.select("Deployment", None, lambda o: True)] == \
        [o["metadata"]["name"] for o in s.list("Deployment")[0]] == ["a", "c", "b"]
    picked[0]["spec"]["replicas"] = 9
    assert s.get("Deployment", "default", "a")["spec"]["replicas"] == 2
    assert s.inspect("Deployment", "default", "a", lambda o: o["spec"]["replicas"]) == 2
    with pytest.raises(ApiError) as e:
        s.inspect("Deployment", "default", "missing", lambda o: o)
    assert e.value.code == 404


def test_names_are_the_keys_of_every_object_in_list_order() -> None:
    """What a controller's resync re-queues: every object, namespaced or not, without a
    copy of any; a deleted one is gone from the names at once."""
    s = Store()
    s.create("Namespace", {"metadata": {"name": "other"}})
    for name, ns in (("c", "default"), ("a", "default"), ("b", "other")):
        s.create("Deployment", deployment(name, ns))
    listed = [(o["metadata"]["namespace"], o["metadata"]["name"])
              for o in s.list("Deployment")[0]]
    assert s.names("Deployment") == listed == [("default", "a"), ("default", "c"),
                                               ("other", "b")]
    assert ("", "other") in s.names("Namespace")
    s.delete("Deployment", "default", "c")
    assert s.names("Deployment") == [("default", "a"), ("other", "b")]


def test_selectors_parse() -> None:
    sel = parse_label_selector("a=1,b==2,c!=3,d in (x,y),e notin (z),f,!g")
    assert sel.matches({"a": "1", "b": "2", "d": "y", "f": ""})
    assert not sel.matches({"a": "1", "b": "2", "d": "y", "f": "", "g": "1"})
    assert not sel.matches({"a": "1", "b": "2", "c": "3", "d": "y", "f": ""})
    fs = parse_field_selector("metadata.name=x,status.phase!=Running")
    assert fs.matches({"metadata": {"name": "x"}, "status": {"phase": "Pending"}})
    assert not fs.matches({"metadata": {"name": "x"}, "status": {"phase": "Running"}})


def test_patch_formats() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {
        "a": {"c": 2, "d": 3}}
    pod: dict[str, Any] = {
        "containers": [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                       {"name": "b", "image": "1"}],
        "ports": [{"containerPort": 80}], "args": ["x"]}
    out = strategic_merge_patch(pod, {
        "containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]},
                       {"name": "b", "$patch": "delete"}],
        "$setElementOrder/containers": [{"name": "a"}], "args": ["y"]})
    assert out["containers"] == [{"name": "a", "image": "1", "env": [
        {"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}]
    assert out["args"] == ["y"] and pod["containers"][1]["name"] == "b"
    svc = strategic_merge_patch({"ports": [{"port": 80, "name": "h"}]},
                                {"ports": [{"port": 80, "name": "http"}]})
    assert svc == {"ports": [{"port": 80, "name": "http"}]}
    assert json_patch({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3},
                                      {"op": "move", "from": "/a/0", "path": "/b"},
                                      {"op": "copy", "from": "/b", "path": "/c~1d"},
                                      {"op": "remove", "path": "/a/0"}]) == {
        "a": [3], "b": 1, "c/d": 1}
    with pytest.raises(PatchError):
        json_patch({}, [{"op": "remove", "path": "/missing"}])


def test_a_failing_subscriber_does_not_undo_the_write() -> None:
    s = Store()

    def broken(event_type: str, kind: str, obj: dict[str, Any]) -> None:
        raise RuntimeError("subscriber bug")

    s.subscribe(broken)
    s.create("ConfigMap", {"metadata": {"name": "c"}})
    assert s.get("ConfigMap", "default", "c")["metadata"]["name"] == "c"


def test_events_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "MAX_EVENTS", 3)
    s = Store()
    cm = s.create("ConfigMap", {"metadata": {"name": "c"}})
    for i in range(5):
        s.record_event(cm, "Reason", f"message {i}")
    messages = [e["message"] for e in s.list("Event")[0]]
    assert sorted(messages) == ["message 2", "message 3", "message 4"]
