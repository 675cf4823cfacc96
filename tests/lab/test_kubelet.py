"""The kubelet: env resolution, image mapping, probes, restarts, volumes, deletion."""

from __future__ import annotations

import base64
import os
import signal
import time
from pathlib import Path

import pytest
from rotate_lab.cluster.api.store import Store
from rotate_lab.cluster.node.containers import ConfigError, container_env, expand, redis_config
from rotate_lab.cluster.node.images import launch_for

from tests.support.minicluster import (
    DRAGONFLY_IMAGE,
    PASSWORD,
    MiniCluster,
    Obj,
    dragonfly_container,
    dragonfly_objects,
    namespace,
    pid_alive,
    resp,
    restart_patch,
    secret,
)
from tests.support.polling import eventually, holds

# -- environment and image mapping (pure functions over a real store) -------------------------


def test_dollar_paren_expansion_follows_kubernetes_rules() -> None:
    env = {"A": "x", "PW": "s3cret"}
    assert expand("--requirepass $(PW)", env) == "--requirepass s3cret"
    assert expand("$(MISSING)-$(A)", env) == "$(MISSING)-x"
    assert expand("$$(PW) and $$ and $", env) == "$(PW) and $ and $"
    assert expand("$(A", env) == "$(A"
    assert expand("$A $(A)$(A)", env) == "$A xx"


def test_container_env_resolves_refs_in_order() -> None:
    store = Store()
    store.create("Namespace", {"metadata": {"name": "ns"}})
    store.create("Secret", secret("ns", "s", {"password": "pw1", "user": "u"}))
    store.create("ConfigMap", {"metadata": {"name": "cm", "namespace": "ns"},
                               "data": {"mode": "fast"}})
    pod: Obj = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                             "labels": {"app": "cart"}},
                "status": {"podIP": "127.9.1.1"}}
    container: Obj = {"envFrom": [{"secretRef": {"name": "s"}, "prefix": "S_"}], "env": [
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "URL", "value": "redis://:$(PW)@$(IP)"},
        {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k",
                                                       "optional": True}}},
    ]}
    env = container_env(store, pod, container)
    assert env == {"S_password": "pw1", "S_user": "u", "PW": "pw1", "MODE": "fast",
                   "IP": "127.9.1.1", "APP": "cart", "URL": "redis://:pw1@127.9.1.1"}
    with pytest.raises(ConfigError, match='secret "gone" not found'):
        container_env(store, pod, {"env": [{"name": "X", "valueFrom": {
            "secretKeyRef": {"name": "gone", "key": "k"}}}]})
    with pytest.raises(ConfigError, match="couldn't find key nope in Secret ns/s"):
        container_env(store, pod, {"env": [{"name": "X", "valueFrom": {
            "secretKeyRef": {"name": "s", "key": "nope"}}}]})


def test_dragonfly_flags_become_redis_config_on_stdin(tmp_path: Path) -> None:
    tricky = 'pa ss"\\w'
    launch = launch_for({**dragonfly_container(), "args": [
        "--requirepass", "$(DRAGONFLY_PASSWORD)", "--port=6380", "--logtostderr",
        "--maxmemory", "64mb"]}, {"DRAGONFLY_PASSWORD": tricky}, pod_ip="127.9.1.2",
        pod_dir=tmp_path, service_name="dragonfly", lab_dir=tmp_path, base_env={})
    assert launch.argv == ["redis-server", "-"]
    assert launch.stdin is not None
    conf = launch.stdin.decode()
    assert 'requirepass "pa ss\\"\\\\w"' in conf
    assert "port \"6380\"" in conf and "bind 127.9.1.2" in conf and 'save ""' in conf
    assert "appendonly no" in conf and "maxmemory \"64mb\"" in conf
    assert launch.notes == ["ignored flags without a redis equivalent: logtostderr"]
    conf2, ignored = redis_config(["--dbnum=4", "--requirepass", "x"], bind="127.0.0.1",
                                  default_port=6379, workdir=tmp_path)
    assert 'databases "4"' in conf2 and ignored == []


# -- pods as processes ------------------------------------------------------------------------


def container_status(mc: MiniCluster, ns: str, name: str) -> Obj:
    [cs] = mc.get("Pod", ns, name)["status"].get("containerStatuses") or [{}]
    return dict(cs)


def bare_pod(name: str, container: Obj, **spec: object) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "dragonfly", "labels": {"app": name}},
            "spec": {"containers": [container], **spec}}


def pod_ready(mc: MiniCluster, ns: str, name: str) -> Obj | None:
    pod = mc.get("Pod", ns, name)
    ready: Obj = next((c for c in pod["status"].get("conditions") or []
                       if c["type"] == "Ready"), {})
    return pod if ready.get("status") == "True" else None


def test_missing_secret_blocks_start_until_it_exists_and_env_is_read_once(
        cluster: MiniCluster) -> None:
    cluster.apply(namespace("dragonfly"), bare_pod("kv", dragonfly_container()))
    eventually(lambda: (container_status(cluster, "dragonfly", "kv")["state"]["waiting"]
                        ["reason"] == "CreateContainerConfigError") or None, 5, "config error")
    assert ('secret "dragonfly-password-secret" not found' in
            container_status(cluster, "dragonfly", "kv")["state"]["waiting"]["message"])

    cluster.apply(secret("dragonfly", "dragonfly-password-secret", {"password": PASSWORD}))
    pod = eventually(lambda: pod_ready(cluster, "dragonfly", "kv"), 5, "pod ready")
    ip = pod["status"]["podIP"]
    assert resp(ip, 6379, ["AUTH", PASSWORD], ["PING"]) == [b"+OK", b"+PONG"]

    # A Secret change does not reach the running process (env is resolved at start) ...
    cluster.store.mutate("Secret", "dragonfly", "dragonfly-password-secret", lambda o: o[
        "data"].update(password=base64.b64encode(b"second-password").decode()))
    assert resp(ip, 6379, ["AUTH", PASSWORD])[0] == b"+OK"
    # ... but a restart of the container does.
    pid = cluster.pids()["dragonfly/kv"]
    os.kill(pid, signal.SIGKILL)
    eventually(lambda: container_status(cluster, "dragonfly", "kv")["restartCount"] == 1 or None,
               5, "restart")
    eventually(lambda: pod_ready(cluster, "dragonfly", "kv"), 5, "ready after restart")
    assert resp(ip, 6379, ["AUTH", "second-password"])[0] == b"+OK"
    cs = container_status(cluster, "dragonfly", "kv")
    assert cs["lastState"]["terminated"]["exitCode"] == 137


def test_exec_probe_with_field_ref_env_drives_readiness(cluster: MiniCluster) -> None:
    container = dragonfly_container(probe={"exec": {"command": [
        "sh", "-c", 'redis-cli -h "$POD_IP" -p 6379 --no-auth-warning -a "$DRAGONFLY_PASSWORD"'
        ' ping | grep -q PONG']}, "periodSeconds": 1, "failureThreshold": 1})
    container["env"].append({"name": "POD_IP",
                             "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    cluster.apply(namespace("dragonfly"),
                  secret("dragonfly", "dragonfly-password-secret", {"password": PASSWORD}),
                  bare_pod("kv", container))
    pod = eventually(lambda: pod_ready(cluster, "dragonfly", "kv"), 8, "ready by exec probe")
    # Change the password inside redis: the probe (old password) now fails → unready.
    assert resp(pod["status"]["podIP"], 6379, ["AUTH", PASSWORD],
                ["CONFIG", "SET", "requirepass", "other"])[1] == b"+OK"
    eventually(lambda: (not container_status(cluster, "dragonfly", "kv")["ready"]) or None, 5,
               "unready after the probe fails")
    assert cluster.get("Pod", "dragonfly", "kv")["status"]["phase"] == "Running"


def test_secret_volume_follows_the_secret_after_the_delay(cluster: MiniCluster) -> None:
    cluster.apply(*dragonfly_objects()[:2], bare_pod(
        "kv", {**dragonfly_container(), "volumeMounts": [{"name": "pw", "mountPath": "/pw"}]},
        volumes=[{"name": "pw", "secret": {"secretName": "dragonfly-password-secret"}}]))
    eventually(lambda: pod_ready(cluster, "dragonfly", "kv"), 5, "pod ready")
    path = cluster.ctx.dir / "pods" / "dragonfly_kv" / "volumes" / "pw" / "password"
    assert path.read_text() == PASSWORD
    assert path.stat().st_mode & 0o777 == 0o644
    changed = time.monotonic()
    cluster.store.mutate("Secret", "dragonfly", "dragonfly-password-secret", lambda o: o[
        "data"].update(password=base64.b64encode(b"next").decode()))
    eventually(lambda: path.read_text() == "next" or None, 5, "volume refreshed")
    assert time.monotonic() - changed >= cluster.ctx.profile.secret_volume_delay * 0.9


def test_deleting_a_pod_stops_its_process_and_forgets_its_pid(cluster: MiniCluster) -> None:
    cluster.apply(*dragonfly_objects()[:2], bare_pod("kv", dragonfly_container()))
    eventually(lambda: pod_ready(cluster, "dragonfly", "kv"), 5, "pod ready")
    pid = cluster.pids()["dragonfly/kv"]
    assert pid_alive(pid)
    log = cluster.ctx.dir / "logs" / "pods" / "dragonfly_kv.log"
    assert "Ready to accept connections" in log.read_text()
    assert PASSWORD not in log.read_text()
    cluster.store.delete("Pod", "dragonfly", "kv")
    eventually(lambda: (not pid_alive(pid)) or None, 5, "process gone")
    eventually(lambda: "dragonfly/kv" not in cluster.pids() or None, 5, "pid forgotten")


def test_provider_crashloop_fault_hits_new_pods_only(cluster: MiniCluster) -> None:
    cluster.apply(*dragonfly_objects())
    cluster.wait_rollout("dragonfly", "dragonfly")
    [old] = cluster.pods("dragonfly", "app=dragonfly")
    cluster.set_fault("provider-crashloop", True)
    cluster.store.patch("Deployment", "dragonfly", "dragonfly", restart_patch("x"), "strategic")

    def new_pod_crashing() -> Obj | None:
        for p in cluster.pods("dragonfly", "app=dragonfly"):
            [cs] = p["status"].get("containerStatuses") or [{}]
            if p["metadata"]["name"] != old["metadata"]["name"] and \
                    cs.get("restartCount", 0) >= 1:
                return p
        return None

    new = eventually(new_pod_crashing, 8, "new pod crash-looping")
    assert not new["status"]["containerStatuses"][0]["ready"]
    # maxUnavailable 25% of 1 rounds down to 0: the old pod keeps serving.
    assert pod_ready(cluster, "dragonfly", old["metadata"]["name"])
    assert resp(old["status"]["podIP"], 6379, ["AUTH", PASSWORD])[0] == b"+OK"
    assert DRAGONFLY_IMAGE in new["spec"]["containers"][0]["image"]


def test_failing_liveness_probe_restarts_the_container(cluster: MiniCluster) -> None:
    container = {**dragonfly_container(), "livenessProbe": {
        "tcpSocket": {"port": 6390}, "periodSeconds": 1, "failureThreshold": 2}}
    cluster.apply(*dragonfly_objects()[:2], bare_pod("kv", container))
    eventually(lambda: container_status(cluster, "dragonfly", "kv")["restartCount"] >= 1 or None,
               8, "restart after liveness failures")
    log = (cluster.ctx.dir / "logs" / "pods" / "dragonfly_kv.log").read_text()
    assert "failed liveness probe" in log


def test_startup_probe_gates_started_and_readiness(cluster: MiniCluster) -> None:
    """Kubernetes' startupProbe: the container runs but is not ``started`` (nor Ready, though
    its readiness probe would pass) until the startup probe succeeds."""
    container = {**dragonfly_container(), "startupProbe": {
        "tcpSocket": {"port": 6390}, "periodSeconds": 1, "failureThreshold": 600}}
    cluster.apply(*dragonfly_objects()[:2], bare_pod("kv", container))
    eventually(lambda: "running" in container_status(cluster, "dragonfly", "kv")["state"]
               or None, 5, "container running")

    def running_not_started() -> bool:
        cs = container_status(cluster, "dragonfly", "kv")
        return "running" in cs["state"] and not cs["started"] and not cs["ready"]

    holds(running_not_started, 1.5, "running, not started, not ready")
    assert pod_ready(cluster, "dragonfly", "kv") is None


def test_startup_probe_success_marks_started_then_readiness_runs(
        cluster: MiniCluster) -> None:
    container = {**dragonfly_container(), "startupProbe": {
        "tcpSocket": {"port": "redis"}, "periodSeconds": 1, "failureThreshold": 30}}
    cluster.apply(*dragonfly_objects()[:2], bare_pod("kv", container))
    eventually(lambda: pod_ready(cluster, "dragonfly", "kv"), 8, "pod ready")
    cs = container_status(cluster, "dragonfly", "kv")
    assert cs["started"] and cs["ready"] and cs["restartCount"] == 0


def test_failing_startup_probe_restarts_the_container(cluster: MiniCluster) -> None:
    container = {**dragonfly_container(), "startupProbe": {
        "tcpSocket": {"port": 6390}, "periodSeconds": 1, "failureThreshold": 2}}
    cluster.apply(*dragonfly_objects()[:2], bare_pod("kv", container))
    eventually(lambda: container_status(cluster, "dragonfly", "kv")["restartCount"] >= 1 or None,
               10, "restart after startup probe failures")
    assert not container_status(cluster, "dragonfly", "kv")["started"]
    log = (cluster.ctx.dir / "logs" / "pods" / "dragonfly_kv.log").read_text()
    assert "failed startup probe" in log
