"""Deployment / ReplicaSet / StatefulSet / Service controllers against real pod processes."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable

import pytest
from rotate_lab.cluster.controllers.deployment import REVISION, REVISION_HISTORY

from tests.support.minicluster import (
    DRAGONFLY_IMAGE,
    PASSWORD,
    MiniCluster,
    Obj,
    dragonfly_objects,
    namespace,
    resp,
    restart_patch,
    rollout_complete,
    service,
)
from tests.support.polling import eventually


def owned_rs(mc: MiniCluster, ns: str, name: str) -> list[Obj]:
    d = mc.get("Deployment", ns, name)
    items = mc.store.list("ReplicaSet", ns)[0]
    return sorted((rs for rs in items
                   if any(r["uid"] == d["metadata"]["uid"]
                          for r in rs["metadata"].get("ownerReferences") or [])),
                  key=lambda rs: int(rs["metadata"]["annotations"][REVISION]))


def pod_names(mc: MiniCluster, ns: str, selector: str) -> set[str]:
    return {p["metadata"]["name"] for p in mc.pods(ns, selector)}


def test_dragonfly_deployment_becomes_ready_without_password_in_argv(cluster: MiniCluster
                                                                      ) -> None:
    cluster.apply(*dragonfly_objects())
    d = cluster.wait_rollout("dragonfly", "dragonfly")
    assert d["metadata"]["annotations"][REVISION] == "1"
    st = d["status"]
    assert (st["replicas"], st["updatedReplicas"], st["readyReplicas"],
            st["availableReplicas"], st["unavailableReplicas"]) == (1, 1, 1, 1, 0)
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Available"]["status"] == "True"
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"

    [pod] = cluster.pods("dragonfly", "app=dragonfly")
    assert pod["status"]["phase"] == "Running"
    assert pod["metadata"]["labels"]["pod-template-hash"]
    [cs] = pod["status"]["containerStatuses"]
    assert cs["ready"] and "running" in cs["state"]
    pid = cluster.pids()["dragonfly/" + pod["metadata"]["name"]]
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        cmdline = fh.read()
    assert b"redis-server" in cmdline
    assert PASSWORD.encode() not in cmdline

    # Through the Service: ClusterIP + forwarder + DNS entry, with the Secret's password.
    def with_ip() -> Obj | None:
        s = cluster.get("Service", "dragonfly", "dragonfly")
        return s if s["spec"].get("clusterIP") else None

    svc = eventually(with_ip, 5, "cluster IP")
    ip = svc["spec"]["clusterIP"]
    assert cluster.ctx.resolver.resolve("dragonfly.dragonfly.svc.cluster.local") == ip
    assert f"{ip} dragonfly.dragonfly.svc.cluster.local" in (cluster.ctx.dir / "hosts").read_text()
    eventually(lambda: cluster.get("Endpoints", "dragonfly", "dragonfly")["subsets"][0]
               ["addresses"], 5, "ready endpoint")
    assert resp(ip, 6379, ["AUTH", PASSWORD], ["PING"]) == [b"+OK", b"+PONG"]
    assert resp(ip, 6379, ["AUTH", "wrong"])[0].startswith(b"-WRONGPASS")
    host, port = cluster.services.proxy_target("dragonfly", "dragonfly", "redis")
    assert (host, port) == (pod["status"]["podIP"], 6379)


def test_rolling_restart_makes_revision_2_and_an_old_template_reuses_its_replicaset(
        cluster: MiniCluster) -> None:
    cluster.apply(*dragonfly_objects(replicas=2))
    cluster.wait_rollout("dragonfly", "dragonfly")
    first_pods = pod_names(cluster, "dragonfly", "app=dragonfly")
    [rs1] = owned_rs(cluster, "dragonfly", "dragonfly")

    cluster.store.patch("Deployment", "dragonfly", "dragonfly",
                        restart_patch("2026-01-01T00:00:00Z"),
                        "strategic")
    d = cluster.wait_rollout("dragonfly", "dragonfly")
    assert d["metadata"]["annotations"][REVISION] == "2"
    old, new = owned_rs(cluster, "dragonfly", "dragonfly")
    assert old["metadata"]["uid"] == rs1["metadata"]["uid"]
    assert old["metadata"]["annotations"][REVISION] == "1" and old["spec"]["replicas"] == 0
    assert new["metadata"]["annotations"][REVISION] == "2" and new["spec"]["replicas"] == 2
    assert new["metadata"]["labels"]["pod-template-hash"] != \
        old["metadata"]["labels"]["pod-template-hash"]
    pods = cluster.pods("dragonfly", "app=dragonfly")
    assert len(pods) == 2 and not first_pods & {p["metadata"]["name"] for p in pods}
    assert all(p["metadata"]["labels"]["pod-template-hash"]
               == new["metadata"]["labels"]["pod-template-hash"] for p in pods)
    st = d["status"]
    assert (st["replicas"], st["updatedReplicas"], st["availableReplicas"]) == (2, 2, 2)

    # Back to the first template: its ReplicaSet becomes new again, with revision 3.
    cluster.store.mutate("Deployment", "dragonfly", "dragonfly", lambda o: o["spec"][
        "template"]["metadata"].pop("annotations"))
    d = cluster.wait_rollout("dragonfly", "dragonfly")
    assert d["metadata"]["annotations"][REVISION] == "3"
    rs_by_uid = {rs["metadata"]["uid"]: rs for rs in owned_rs(cluster, "dragonfly", "dragonfly")}
    back = rs_by_uid[rs1["metadata"]["uid"]]
    assert back["metadata"]["annotations"][REVISION] == "3"
    assert back["metadata"]["annotations"][REVISION_HISTORY] == "1"
    assert back["spec"]["replicas"] == 2 and len(rs_by_uid) == 2


def test_rolling_update_respects_max_unavailable_zero(cluster: MiniCluster) -> None:
    objs = dragonfly_objects(replicas=2, strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    cluster.apply(*objs)
    cluster.wait_rollout("dragonfly", "dragonfly")
    lowest_available: list[int] = []

    def watch(event: str, kind: str, obj: Obj) -> None:
        if kind == "Deployment" and obj["metadata"]["name"] == "dragonfly":
            lowest_available.append(int((obj.get("status") or {}).get("availableReplicas", 0)))

    cluster.store.subscribe(watch)
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", restart_patch("x"),
                        "strategic")
    cluster.wait_rollout("dragonfly", "dragonfly")
    assert lowest_available and min(lowest_available) >= 2


def ready_ips(endpoints: Obj) -> list[str]:
    return sorted(str(a["ip"]) for s in endpoints.get("subsets") or []
                  for a in s.get("addresses") or [])


def test_a_scaled_down_pod_terminates_gracefully(cluster: MiniCluster) -> None:
    """As in Kubernetes: the surplus pod gets ``deletionTimestamp`` (Terminating), leaves the
    endpoints at once, no longer counts as a replica, and is removed once its process exited."""
    cluster.apply(*dragonfly_objects(replicas=2))
    cluster.wait_rollout("dragonfly", "dragonfly")
    eventually(lambda: len(ready_ips(cluster.get("Endpoints", "dragonfly", "dragonfly"))) == 2
               or None, 10, "both pods to be endpoints")
    ips = {p["metadata"]["name"]: p["status"]["podIP"]
           for p in cluster.pods("dragonfly", "app=dragonfly")}
    seen: list[tuple[str, object]] = []

    def watch(event: str, kind: str, obj: Obj) -> None:
        if kind == "Pod" and obj["metadata"].get("deletionTimestamp"):
            seen.append((f"{event} {kind}", (obj["metadata"]["name"],
                                             obj["metadata"].get("deletionGracePeriodSeconds"))))
        elif kind == "Endpoints" and obj["metadata"]["name"] == "dragonfly":
            seen.append(("endpoints", ready_ips(obj)))

    cluster.store.subscribe(watch)
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", {"spec": {"replicas": 1}},
                        "merge")
    eventually(lambda: len(cluster.pods("dragonfly", "app=dragonfly", terminating=True)) == 1
               or None, 15, "the surplus pod removed")
    marked = [v for e, v in seen if e == "MODIFIED Pod"]
    assert marked, seen
    name, grace = marked[0]  # type: ignore[misc]
    assert grace == 30 and name in ips
    gone_at = seen.index(("DELETED Pod", (name, 30)))
    dropped_at = next(i for i, (e, v) in enumerate(seen)
                      if e == "endpoints" and ips[name] not in v)  # type: ignore[operator]
    assert dropped_at < gone_at, seen
    rs = eventually(lambda: next((r for r in owned_rs(cluster, "dragonfly", "dragonfly")
                                  if (r.get("status") or {}).get("replicas") == 1), None),
                    10, "the ReplicaSet to count one replica")
    assert rs["status"]["replicas"] == 1


def test_a_rolling_update_never_publishes_an_empty_endpoint_set(cluster: MiniCluster) -> None:
    """One replica, maxSurge 1 / maxUnavailable 0: every version of the Endpoints written
    during the rollout has a Ready address (the old pod until the new one is Ready), so the
    Service proxy never answers "no endpoints available"."""
    cluster.apply(*dragonfly_objects(replicas=1, strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}))
    cluster.wait_rollout("dragonfly", "dragonfly")
    eventually(lambda: ready_ips(cluster.get("Endpoints", "dragonfly", "dragonfly")) or None,
               10, "the first pod to be an endpoint")
    published: list[list[str]] = []

    def watch(event: str, kind: str, obj: Obj) -> None:
        if kind == "Endpoints" and obj["metadata"]["name"] == "dragonfly":
            published.append(ready_ips(obj))

    cluster.store.subscribe(watch)
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", restart_patch("x"),
                        "strategic")
    cluster.wait_rollout("dragonfly", "dragonfly")
    [pod] = cluster.pods("dragonfly", "app=dragonfly")
    new_ip = pod["status"]["podIP"]
    eventually(lambda: ready_ips(cluster.get("Endpoints", "dragonfly", "dragonfly"))
               == [new_ip] or None, 10, "the new pod to be the endpoint")
    assert published and all(published), published


def test_a_pod_change_reconciles_only_the_services_selecting_it(cluster: MiniCluster) -> None:
    """As the endpoints controller's pod→service memberships: a pod event queues the Services
    it is (or was) an endpoint of, not every Service of its namespace."""
    cluster.apply(*dragonfly_objects(), service(
        "dragonfly", "other", [{"name": "x", "port": 7000}], {"app": "other"}))
    cluster.wait_rollout("dragonfly", "dragonfly")
    [pod] = cluster.pods("dragonfly", "app=dragonfly")
    mine, other = ("Service", "dragonfly", "dragonfly"), ("Service", "dragonfly", "other")
    assert cluster.services.keys_for("MODIFIED", "Pod", pod) == [mine]
    moved = copy.deepcopy(pod)
    moved["metadata"]["labels"] = {"app": "other"}
    assert cluster.services.keys_for("MODIFIED", "Pod", moved) == [mine, other]  # leaves mine
    assert cluster.services.keys_for("DELETED", "Pod", moved) == [other]


def test_revision_history_limit_prunes_the_oldest_idle_replicasets(cluster: MiniCluster
                                                                   ) -> None:
    cluster.apply(*dragonfly_objects(revisionHistoryLimit=1))
    cluster.wait_rollout("dragonfly", "dragonfly")
    for n in range(3):
        cluster.store.patch("Deployment", "dragonfly", "dragonfly", restart_patch(str(n)),
                            "strategic")
        cluster.wait_rollout("dragonfly", "dragonfly")
    def two_left() -> list[Obj] | None:
        found = owned_rs(cluster, "dragonfly", "dragonfly")
        return found if len(found) == 2 else None

    rs = eventually(two_left, 5, "two ReplicaSets left")
    assert [r["metadata"]["annotations"][REVISION] for r in rs] == ["3", "4"]
    assert rs[0]["spec"]["replicas"] == 0


def test_recreate_strategy_stops_old_pods_before_starting_new_ones(cluster: MiniCluster
                                                                   ) -> None:
    cluster.apply(*dragonfly_objects(replicas=2, strategy={"type": "Recreate"}))
    cluster.wait_rollout("dragonfly", "dragonfly")
    old = pod_names(cluster, "dragonfly", "app=dragonfly")
    overlap: list[int] = []

    def watch(event: str, kind: str, obj: Obj) -> None:
        if kind == "Pod" and event == "ADDED":
            overlap.append(len(old & pod_names(cluster, "dragonfly", "app=dragonfly")))

    cluster.store.subscribe(watch)
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", restart_patch("r"), "strategic")
    cluster.wait_rollout("dragonfly", "dragonfly")
    assert overlap == [0, 0]


def test_paused_deployment_does_not_roll_until_resumed(cluster: MiniCluster) -> None:
    cluster.apply(*dragonfly_objects())
    cluster.wait_rollout("dragonfly", "dragonfly")
    before = pod_names(cluster, "dragonfly", "app=dragonfly")
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", {"spec": {"paused": True}},
                        "merge")
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", restart_patch("paused"),
                        "strategic")

    def paused_observed() -> Obj | None:
        d = cluster.get("Deployment", "dragonfly", "dragonfly")
        st = d.get("status") or {}
        conds = {c["type"]: c for c in st.get("conditions") or []}
        return d if (st.get("observedGeneration") == d["metadata"]["generation"]
                     and conds["Progressing"]["reason"] == "DeploymentPaused") else None

    d = eventually(paused_observed, 5, "paused deployment observed")
    assert d["metadata"]["annotations"][REVISION] == "1"
    assert len(owned_rs(cluster, "dragonfly", "dragonfly")) == 1
    assert pod_names(cluster, "dragonfly", "app=dragonfly") == before
    assert not rollout_complete(d)  # updatedReplicas 0 of 1: kubectl keeps waiting

    cluster.store.patch("Deployment", "dragonfly", "dragonfly", {"spec": {"paused": False}},
                        "merge")
    d = cluster.wait_rollout("dragonfly", "dragonfly")
    assert d["metadata"]["annotations"][REVISION] == "2"
    assert not before & pod_names(cluster, "dragonfly", "app=dragonfly")


def test_crashloop_fault_keeps_new_pods_unready_and_deadline_is_exceeded(
        cluster: MiniCluster) -> None:
    cluster.set_fault("crashloop", ["dragonfly"])
    cluster.apply(*dragonfly_objects(progressDeadlineSeconds=2))

    def restarted_twice() -> Obj | None:
        [pod] = cluster.pods("dragonfly", "app=dragonfly")
        [cs] = pod["status"].get("containerStatuses") or [{}]
        return pod if cs.get("restartCount", 0) >= 2 else None

    pod = eventually(restarted_twice, 10, "restartCount >= 2")
    [cs] = pod["status"]["containerStatuses"]
    assert not cs["ready"]
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    events = cluster.store.list("Event", "dragonfly")[0]
    assert any(e["reason"] == "BackOff" and e["type"] == "Warning"
               and e["involvedObject"]["name"] == pod["metadata"]["name"] for e in events)
    eventually(lambda: ((cluster.get("Pod", "dragonfly", pod["metadata"]["name"])["status"]
                        ["containerStatuses"][0]["state"].get("waiting") or {})
                        .get("reason") == "CrashLoopBackOff") or None, 5, "CrashLoopBackOff")

    def deadline_exceeded() -> Obj | None:
        d = cluster.get("Deployment", "dragonfly", "dragonfly")
        conds = {c["type"]: c for c in (d.get("status") or {}).get("conditions") or []}
        prog = conds.get("Progressing") or {}
        return d if prog.get("reason") == "ProgressDeadlineExceeded" else None

    d = eventually(deadline_exceeded, 8, "ProgressDeadlineExceeded")
    conds = {c["type"]: c for c in d["status"]["conditions"]}
    assert conds["Progressing"]["status"] == "False"
    assert conds["Available"]["status"] == "False"
    with pytest.raises(AssertionError, match="deadline exceeded"):
        rollout_complete(d)

    # Clearing the fault heals the same pod at its next restart; the rollout then completes.
    cluster.set_fault("crashloop", [])
    d = cluster.wait_rollout("dragonfly", "dragonfly", timeout=15)
    assert {p["metadata"]["uid"] for p in cluster.pods("dragonfly", "app=dragonfly")} == {
        pod["metadata"]["uid"]}
    conds = {c["type"]: c for c in d["status"]["conditions"]}
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"


def test_unknown_image_leaves_pod_waiting_with_reason(cluster: MiniCluster) -> None:
    cluster.apply(namespace("misc"), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nope", "namespace": "misc"},
        "spec": {"containers": [{"name": "c", "image": "quay.io/acme/unknown:1"}]}})

    def waiting() -> Obj | None:
        pod = cluster.get("Pod", "misc", "nope")
        [cs] = pod["status"].get("containerStatuses") or [{}]
        w = (cs.get("state") or {}).get("waiting") or {}
        return w if w.get("reason") in ("ErrImagePull", "ImagePullBackOff") else None

    w = eventually(waiting, 5, "image pull failure")
    assert "quay.io/acme/unknown:1" in w["message"]
    pod = cluster.get("Pod", "misc", "nope")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["podIP"].startswith(f"127.{cluster.ctx.network.octet}.")


def sts(name: str, replicas: int, strategy: str) -> Obj:
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "dragonfly"},
        "spec": {"replicas": replicas, "serviceName": name,
                 "selector": {"matchLabels": {"app": name}},
                 "updateStrategy": {"type": strategy},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
                     "name": "kv", "image": DRAGONFLY_IMAGE, "args": ["--port", "6379"],
                     "ports": [{"containerPort": 6379}],
                     "readinessProbe": {"tcpSocket": {"port": 6379}}}]}}},
    }


def sts_ready(mc: MiniCluster, name: str, replicas: int) -> Obj | None:
    s = mc.get("StatefulSet", "dragonfly", name)
    st = s.get("status") or {}
    return s if (st.get("readyReplicas") == replicas
                 and st.get("observedGeneration") == s["metadata"]["generation"]) else None


def revision_labels(mc: MiniCluster, name: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["labels"]["controller-revision-hash"]
            for p in mc.pods("dragonfly", f"app={name}")}


def test_statefulset_on_delete_rolls_nothing_until_a_pod_is_deleted(cluster: MiniCluster
                                                                    ) -> None:
    cluster.apply(namespace("dragonfly"), sts("kv", 2, "OnDelete"))
    s = eventually(lambda: sts_ready(cluster, "kv", 2), 10, "statefulset ready")
    old_rev = s["status"]["currentRevision"]
    assert revision_labels(cluster, "kv") == {"kv-0": old_rev, "kv-1": old_rev}

    cluster.store.patch("StatefulSet", "dragonfly", "kv", restart_patch("now"),
                        "strategic")
    def new_revision() -> Obj | None:
        x = cluster.get("StatefulSet", "dragonfly", "kv")
        return x if (x["status"]["updateRevision"] != old_rev and
                     x["status"]["observedGeneration"] == x["metadata"]["generation"]) else None

    s = eventually(new_revision, 5, "update revision")
    new_rev = s["status"]["updateRevision"]
    assert s["status"]["currentRevision"] == old_rev and s["status"]["updatedReplicas"] == 0
    assert revision_labels(cluster, "kv") == {"kv-0": old_rev, "kv-1": old_rev}

    uid = cluster.get("Pod", "dragonfly", "kv-0")["metadata"]["uid"]
    cluster.store.delete("Pod", "dragonfly", "kv-0")
    def recreated() -> Obj | None:
        p = cluster.get("Pod", "dragonfly", "kv-0")
        return p if (p["metadata"]["uid"] != uid and
                     p["metadata"]["labels"]["controller-revision-hash"] == new_rev) else None

    eventually(recreated, 5, "kv-0 recreated from the update revision")
    s = eventually(lambda: sts_ready(cluster, "kv", 2), 10, "ready again")
    assert revision_labels(cluster, "kv") == {"kv-0": new_rev, "kv-1": old_rev}
    assert s["status"]["updatedReplicas"] == 1


def test_statefulset_rolling_update_goes_from_the_highest_ordinal_down(
        cluster: MiniCluster, kubectl: Callable[..., str]) -> None:
    cluster.apply(namespace("dragonfly"), sts("kv", 3, "RollingUpdate"))
    created: list[str] = []
    cluster.store.subscribe(lambda ev, kind, obj: created.append(obj["metadata"]["name"])
                            if kind == "Pod" and ev == "ADDED" else None)
    eventually(lambda: sts_ready(cluster, "kv", 3), 10, "statefulset ready")
    assert created == ["kv-0", "kv-1", "kv-2"]  # OrderedReady
    deleted: list[str] = []
    cluster.store.subscribe(lambda ev, kind, obj: deleted.append(obj["metadata"]["name"])
                            if kind == "Pod" and ev == "DELETED" else None)
    cluster.store.patch("StatefulSet", "dragonfly", "kv", restart_patch("now"),
                        "strategic")

    def rolled() -> Obj | None:
        s = cluster.get("StatefulSet", "dragonfly", "kv")
        st = s["status"]
        return s if (st["currentRevision"] == st["updateRevision"] and st["readyReplicas"] == 3
                     and st["updatedReplicas"] == 3
                     and st["observedGeneration"] == s["metadata"]["generation"]) else None

    s = eventually(rolled, 15, "rolling update complete")
    assert deleted == ["kv-2", "kv-1", "kv-0"]
    assert set(revision_labels(cluster, "kv").values()) == {s["status"]["updateRevision"]}
    revisions = sorted(r["revision"] for r in cluster.store.list(
        "ControllerRevision", "dragonfly")[0])
    assert revisions == [1, 2]
    out = kubectl("rollout", "status", "-n", "dragonfly", "statefulset/kv", "--timeout=10s")
    # partition defaults to 0 (as on a real API server), so kubectl takes its partitioned path
    assert "roll out complete: 3 new pods have been updated" in out
    history = kubectl("rollout", "history", "-n", "dragonfly", "statefulset/kv")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_rollout_restart_status_and_history(cluster: MiniCluster,
                                                   kubectl: Callable[..., str]) -> None:
    cluster.apply(*dragonfly_objects(replicas=2))
    out = kubectl("rollout", "status", "-n", "dragonfly", "deployment/dragonfly",
                  "--timeout=20s")
    assert 'deployment "dragonfly" successfully rolled out' in out
    first = pod_names(cluster, "dragonfly", "app=dragonfly")
    kubectl("rollout", "restart", "-n", "dragonfly", "deployment/dragonfly")
    out = kubectl("rollout", "status", "-n", "dragonfly", "deployment/dragonfly",
                  "--timeout=20s")
    assert 'deployment "dragonfly" successfully rolled out' in out
    assert not first & pod_names(cluster, "dragonfly", "app=dragonfly")
    history = kubectl("rollout", "history", "-n", "dragonfly", "deployment/dragonfly")
    revisions = [line.split()[0] for line in history.splitlines()[2:] if line.strip()]
    assert revisions == ["1", "2"], history
    detail = kubectl("rollout", "history", "-n", "dragonfly", "deployment/dragonfly",
                     "--revision=2")
    assert "kubectl.kubernetes.io/restartedAt" in detail
    kubectl("annotate", "-n", "dragonfly", "deployment/dragonfly",
            "kubernetes.io/change-cause=restart for the test")
    def with_cause() -> str | None:
        h = kubectl("rollout", "history", "-n", "dragonfly", "deployment/dragonfly")
        return h if "restart for the test" in h else None

    history = eventually(with_cause, 5, "change-cause")
    rows = [line.split(None, 1) for line in history.splitlines() if line[:1].isdigit()]
    assert rows == [["1", "<none>"], ["2", "restart for the test"]]

    # A crash-looping rollout fails kubectl the way a real cluster does.
    cluster.set_fault("crashloop", ["dragonfly"])
    # (not a second `rollout restart`: kubectl refuses two within the same second)
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", {"spec": {
        "progressDeadlineSeconds": 2, **restart_patch("crash")["spec"]}}, "strategic")
    out = kubectl("rollout", "status", "-n", "dragonfly", "deployment/dragonfly",
                  "--timeout=20s", ok=False)
    assert "exceeded its progress deadline" in out
    # maxUnavailable 25% of 2 rounds down to 0: both old pods still serve.
    d = cluster.get("Deployment", "dragonfly", "dragonfly")
    assert d["status"]["availableReplicas"] == 2
