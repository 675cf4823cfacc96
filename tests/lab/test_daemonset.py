"""DaemonSet controller against the real store, kubelet (redis-server pods) and kubectl."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from rotate_lab.cluster.controllers.daemonset import NODE_NAME, DaemonSetController

from tests.support.minicluster import (
    DRAGONFLY_IMAGE,
    PASSWORD,
    MiniCluster,
    Obj,
    namespace,
    resp,
    restart_patch,
    secret,
)
from tests.support.polling import eventually

NS = "nodes"


@pytest.fixture
def mc(cluster: MiniCluster) -> Iterator[MiniCluster]:
    """The mini cluster plus the DaemonSet controller (stopped with the others)."""
    controller = DaemonSetController(cluster.ctx)
    cluster.controllers.append(controller)
    controller.start()
    yield cluster


def daemonset(name: str, strategy: str | None = None) -> Obj:
    spec: Obj = {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
            "name": "kv", "image": DRAGONFLY_IMAGE,
            "args": ["--requirepass", "$(PW)", "--port", "6379"],
            "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "pw",
                                                                  "key": "password"}}}],
            "ports": [{"containerPort": 6379}],
            "readinessProbe": {"tcpSocket": {"port": 6379}, "periodSeconds": 1}}]}},
    }
    if strategy is not None:
        spec["updateStrategy"] = {"type": strategy}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


def rolled_out(mc: MiniCluster, name: str) -> Obj | None:
    """kubectl's DaemonSetStatusViewer rules for "successfully rolled out"."""
    ds = mc.get("DaemonSet", NS, name)
    st = ds.get("status") or {}
    return ds if (st.get("observedGeneration", 0) >= ds["metadata"]["generation"]
                  and st.get("updatedNumberScheduled", 0) == st.get("desiredNumberScheduled")
                  and st.get("numberAvailable", 0) == st.get("desiredNumberScheduled")
                  and st.get("desiredNumberScheduled") == 1) else None


def only_pod(mc: MiniCluster, name: str) -> Obj:
    [pod] = mc.pods(NS, f"app={name}")
    return pod


def test_daemonset_runs_one_owned_pod_and_reports_status(mc: MiniCluster) -> None:
    mc.apply(namespace(NS), secret(NS, "pw", {"password": PASSWORD}), daemonset("agent"))
    ds = eventually(lambda: rolled_out(mc, "agent"), 10, "daemonset ready")
    assert ds["spec"]["updateStrategy"] == {  # defaulted by the API server, as upstream
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    st = ds["status"]
    assert {k: st[k] for k in ("desiredNumberScheduled", "currentNumberScheduled",
                               "updatedNumberScheduled", "numberReady", "numberAvailable",
                               "numberUnavailable", "numberMisscheduled")} == {
        "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1,
        "numberReady": 1, "numberAvailable": 1, "numberUnavailable": 0,
        "numberMisscheduled": 0}
    pod = only_pod(mc, "agent")
    [ref] = pod["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
        "DaemonSet", "agent", ds["metadata"]["uid"], True)
    labels = pod["metadata"]["labels"]
    assert labels["pod-template-generation"] == "1"
    assert pod["metadata"]["name"].startswith("agent-")
    assert pod["spec"]["nodeName"] == NODE_NAME
    [rev] = mc.store.list("ControllerRevision", NS)[0]
    assert rev["metadata"]["name"] == f"agent-{labels['controller-revision-hash']}"
    assert rev["revision"] == 1
    ip = pod["status"]["podIP"]
    assert resp(ip, 6379, ["AUTH", PASSWORD], ["PING"]) == [b"+OK", b"+PONG"]


def test_kubectl_rollout_restart_replaces_the_pod_and_status_completes(
        mc: MiniCluster, kubectl: Callable[..., str]) -> None:
    mc.apply(namespace(NS), secret(NS, "pw", {"password": PASSWORD}), daemonset("agent"))
    out = kubectl("rollout", "status", "-n", NS, "ds/agent", "--timeout=15s")
    assert 'daemon set "agent" successfully rolled out' in out
    before = only_pod(mc, "agent")
    deleted: list[str] = []
    mc.store.subscribe(lambda ev, kind, obj: deleted.append(obj["metadata"]["name"])
                        if kind == "Pod" and ev == "DELETED" else None)

    kubectl("rollout", "restart", "-n", NS, "ds/agent")
    out = kubectl("rollout", "status", "-n", NS, "ds/agent", "--timeout=15s")
    assert 'daemon set "agent" successfully rolled out' in out
    after = only_pod(mc, "agent")
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert deleted == [before["metadata"]["name"]]  # rolled exactly once
    old_hash = before["metadata"]["labels"]["controller-revision-hash"]
    new_hash = after["metadata"]["labels"]["controller-revision-hash"]
    assert new_hash != old_hash
    assert after["metadata"]["labels"]["pod-template-generation"] == "2"
    assert "kubectl.kubernetes.io/restartedAt" in after["metadata"]["annotations"]
    assert resp(after["status"]["podIP"], 6379, ["AUTH", PASSWORD]) == [b"+OK"]
    history = kubectl("rollout", "history", "-n", NS, "ds/agent")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]


def test_on_delete_rolls_nothing_until_the_pod_is_deleted(
        mc: MiniCluster, kubectl: Callable[..., str]) -> None:
    mc.apply(namespace(NS), secret(NS, "pw", {"password": PASSWORD}),
              daemonset("agent", "OnDelete"))
    eventually(lambda: rolled_out(mc, "agent"), 10, "daemonset ready")
    before = only_pod(mc, "agent")
    old_hash = before["metadata"]["labels"]["controller-revision-hash"]
    mc.store.patch("DaemonSet", NS, "agent", restart_patch("now"), "strategic")

    def observed() -> Obj | None:
        ds = mc.get("DaemonSet", NS, "agent")
        return ds if ds["status"]["observedGeneration"] == ds["metadata"]["generation"] else None

    ds = eventually(observed, 5, "new generation observed")
    assert ds["status"]["updatedNumberScheduled"] == 0
    assert ds["status"]["numberAvailable"] == 1
    assert len(mc.store.list("ControllerRevision", NS)[0]) == 2
    assert only_pod(mc, "agent")["metadata"]["uid"] == before["metadata"]["uid"]
    out = kubectl("rollout", "status", "-n", NS, "ds/agent", "--timeout=5s", ok=False)
    assert "only available for RollingUpdate strategy type" in out

    mc.store.delete("Pod", NS, before["metadata"]["name"])

    def replaced() -> Obj | None:
        pods = mc.pods(NS, "app=agent")
        return pods[0] if (len(pods) == 1 and pods[0]["metadata"]["uid"]
                           != before["metadata"]["uid"]) else None

    after = eventually(replaced, 5, "pod recreated")
    assert after["metadata"]["labels"]["controller-revision-hash"] != old_hash
    assert after["metadata"]["labels"]["pod-template-generation"] == "2"
    eventually(lambda: rolled_out(mc, "agent"), 10, "updated pod available")
