"""The sample shop service, run by the kubelet against the real Config Center and redis-server.

The Config Center runs in-process on 127.0.0.1 and is reached the lab's way: a Service
``platform/config-center`` without a selector plus hand-made Endpoints.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rotate_lab.systems.configcenter import ConfigCenterServer
from rotate_lab.systems.configcenter_state import State

from tests.support.minicluster import (
    PASSWORD,
    SHOP_IMAGE,
    MiniCluster,
    Obj,
    ThreadedServer,
    deployment,
    dragonfly_objects,
    namespace,
    resp,
    restart_patch,
    secret,
    service,
)
from tests.support.polling import eventually


@dataclass
class Shop:
    mc: MiniCluster
    state: State
    token: str
    token_id: str
    cc_port: int

    def get(self, host: str, port: int, path: str,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection(host, port, timeout=3)
        try:
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            return r.status, json.loads(r.read() or b"{}")
        finally:
            conn.close()

    def cart_pod(self) -> Obj:
        [pod] = [p for p in self.mc.pods("shop", "app=cart")
                 if (p.get("status") or {}).get("podIP")]
        return pod

    def cart_ready(self, want: bool) -> Obj | None:
        pod = self.cart_pod()
        ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
        return pod if (ready["status"] == "True") == want else None


def bootstrap_doc(password: str) -> Obj:
    host = "dragonfly.dragonfly.svc.cluster.local"
    return {"service": {"name": "cart"}, "dragonfly": {
        "host": host, "port": 6379, "password": password,
        "url": f"redis://:{password}@{host}:6379/0"}}


def cart_objects(token: str) -> list[Obj]:
    container = {
        "name": "cart", "image": SHOP_IMAGE,
        "env": [
            {"name": "CONFIG_CENTER_URL",
             "value": "http://config-center.platform.svc.cluster.local"},
            {"name": "CONFIG_CENTER_TOKEN", "valueFrom": {"secretKeyRef": {
                "name": "cart-config-token", "key": "token"}}},
        ],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"},
                           "periodSeconds": 1, "failureThreshold": 1},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                          "periodSeconds": 5, "failureThreshold": 3},
    }
    return [namespace("shop"), secret("shop", "cart-config-token", {"token": token}),
            deployment("shop", "cart", [container]),
            service("shop", "cart", [{"name": "http", "port": 80, "targetPort": "http"}],
                    {"app": "cart"})]


@pytest.fixture
def shop(cluster: MiniCluster, tmp_path: Path) -> Iterator[Shop]:
    state = State(tmp_path / "cc.db")
    state.put_schema("cart", {"type": "object"})
    state.put_key("cart", "bootstrap", bootstrap_doc(PASSWORD))
    minted = state.mint_token("cart")
    server = ThreadedServer(ConfigCenterServer(("127.0.0.1", 0), state, "admin-token",
                                               cluster.ctx.dir / "faults.json"))
    try:
        cluster.apply(namespace("platform"),
                      service("platform", "config-center",
                              [{"name": "http", "port": 80, "targetPort": server.port}], None),
                      {"apiVersion": "v1", "kind": "Endpoints",
                       "metadata": {"name": "config-center", "namespace": "platform"},
                       "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                    "ports": [{"name": "http", "port": server.port}]}]})
        cluster.apply(*dragonfly_objects())
        cluster.wait_rollout("dragonfly", "dragonfly")
        cluster.apply(*cart_objects(minted.token))
        cluster.wait_rollout("shop", "cart")
        yield Shop(cluster, state, minted.token, minted.id, server.port)
    finally:
        cluster.kubelet.stop()  # pods first: they talk to the Config Center
        server.close()
        state.close()


def cluster_ip(mc: MiniCluster, ns: str, name: str) -> str:
    return str(eventually(lambda: mc.get("Service", ns, name)["spec"].get("clusterIP"), 5,
                          "cluster IP"))


def test_service_boots_from_config_center_and_works_through_its_service(shop: Shop) -> None:
    mc = shop.mc
    ip = cluster_ip(mc, "shop", "cart")
    eventually(lambda: mc.get("Endpoints", "shop", "cart")["subsets"][0]["addresses"], 5,
               "cart endpoint")
    assert shop.get(ip, 80, "/healthz")[0] == 200
    assert shop.get(ip, 80, "/readyz") == (200, {"status": "ready"})
    assert shop.get(ip, 80, "/work")[0] == 200
    host, port = mc.services.proxy_target("shop", "cart", "http")
    assert (host, port) == (shop.cart_pod()["status"]["podIP"], 8080)
    # The round trip really happened in redis.
    dip = cluster_ip(mc, "dragonfly", "dragonfly")
    keys = resp(dip, 6379, ["AUTH", PASSWORD], ["KEYS", "lab:work:cart:*"])
    assert keys[0] == b"+OK" and keys[1] != b"*0"

    pod = shop.cart_pod()
    pid = mc.pids()[f"shop/{pod['metadata']['name']}"]
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        cmdline = fh.read()
    assert b"rotate_lab.shop.sample_service" in cmdline
    log = (mc.ctx.dir / "logs" / "pods" / f"shop_{pod['metadata']['name']}.log").read_text()
    assert "bootstrap loaded" in log
    assert PASSWORD not in log and shop.token not in log and shop.token not in cmdline.decode()


def test_readyz_follows_dragonfly_auth_and_the_document_is_read_once(shop: Shop) -> None:
    mc = shop.mc
    dip = cluster_ip(mc, "dragonfly", "dragonfly")
    new_password = "Nw4Pass" + "q" * 20
    # The provider changes its password behind the service's back: AUTH now fails.
    assert resp(dip, 6379, ["AUTH", PASSWORD],
                ["CONFIG", "SET", "requirepass", new_password])[1] == b"+OK"
    pod = eventually(lambda: shop.cart_ready(False), 5, "cart unready")
    status, body = shop.get(pod["status"]["podIP"], 8080, "/readyz")
    assert status == 503 and "WRONGPASS" in body["reason"]
    assert new_password not in body["reason"] and PASSWORD not in body["reason"]

    # A new document alone changes nothing (read once); a restart picks it up.
    shop.state.put_key("cart", "bootstrap", bootstrap_doc(new_password))
    assert shop.get(pod["status"]["podIP"], 8080, "/readyz")[0] == 503
    mc.store.patch("Deployment", "shop", "cart", restart_patch("rotated"), "strategic")
    d = mc.wait_rollout("shop", "cart")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    fresh = shop.cart_pod()
    assert fresh["metadata"]["name"] != pod["metadata"]["name"]
    assert shop.get(fresh["status"]["podIP"], 8080, "/work")[0] == 200


def test_revoked_token_and_readyz_fault_make_readyz_fail(shop: Shop) -> None:
    mc = shop.mc
    pod_ip = shop.cart_pod()["status"]["podIP"]
    mc.set_fault("readyz-fail", ["cart"])
    status, body = shop.get(pod_ip, 8080, "/readyz")
    assert status == 503 and "readyz-fail" in body["reason"]
    # The kubelet's probe (kube-probe user agent) does not see this fault: the pod stays Ready.
    assert shop.get(pod_ip, 8080, "/readyz", {"User-Agent": "kube-probe/1.32"})[0] == 200
    assert shop.cart_ready(True)
    # /metrics counts the 503 given to a client, never the kubelet's probes
    assert _failures(pod_ip) == 1.0
    shop.get(pod_ip, 8080, "/readyz")
    assert _failures(pod_ip) == 2.0
    mc.set_fault("readyz-fail", [])
    assert shop.get(pod_ip, 8080, "/readyz")[0] == 200
    assert _failures(pod_ip) == 2.0

    assert shop.state.revoke_token("cart", shop.token_id)
    eventually(lambda: shop.cart_ready(False), 5, "cart unready after revocation")
    status, body = shop.get(pod_ip, 8080, "/readyz")
    assert status == 503 and "token" in body["reason"]
    assert shop.get(pod_ip, 8080, "/healthz")[0] == 200  # liveness is unaffected


def _failures(pod_ip: str) -> float:
    """``lab_readyz_failures_total`` of cart, from its /metrics (Prometheus text)."""
    import httpx

    text = httpx.get(f"http://{pod_ip}:8080/metrics", timeout=5).text
    line = next(x for x in text.splitlines() if x.startswith("lab_readyz_failures_total{"))
    assert 'service="cart"' in line
    return float(line.rsplit(" ", 1)[1])


def test_kubectl_reaches_readyz_through_the_service_proxy(shop: Shop,
                                                          kubectl: Callable[..., str]) -> None:
    out = kubectl("get", "--raw", "/api/v1/namespaces/shop/services/cart:http/proxy/readyz")
    assert json.loads(out) == {"status": "ready"}
    shop.mc.set_fault("readyz-fail", ["cart"])
    out = kubectl("get", "--raw", "/api/v1/namespaces/shop/services/cart:http/proxy/readyz",
                  ok=False)
    assert "ServiceUnavailable" in out or "503" in out, out
    # With the revoked token the pod turns unready: no endpoint is left for the proxy.
    shop.mc.set_fault("readyz-fail", [])
    assert shop.state.revoke_token("cart", shop.token_id)
    eventually(lambda: shop.cart_ready(False), 5, "cart unready")
    eventually(lambda: not shop.mc.get("Endpoints", "shop", "cart")["subsets"][0].get(
        "addresses") or None, 5, "no ready address")
    out = kubectl("get", "--raw", "/api/v1/namespaces/shop/services/cart:http/proxy/readyz",
                  ok=False)
    assert "ServiceUnavailable" in out or "503" in out, out


# -- the program on its own --------------------------------------------------------------------


@pytest.fixture
def config_center(tmp_path: Path) -> Iterator[tuple[State, int, str]]:
    state = State(tmp_path / "cc.db")
    state.put_schema("product", {"type": "object"})
    state.put_key("product", "bootstrap", {"service": {"name": "product"}})
    token = state.mint_token("product").token
    server = ThreadedServer(ConfigCenterServer(("127.0.0.1", 0), state, "admin", None))
    try:
        yield state, server.port, token
    finally:
        server.close()
        state.close()


def run_service(tmp_path: Path, cc_port: int, token: str, port: int,
                **extra: str) -> subprocess.Popen[str]:
    env = {"PATH": os.environ["PATH"],
           "CONFIG_CENTER_URL": f"http://127.0.0.1:{cc_port}", "CONFIG_CENTER_TOKEN": token,
           "POD_IP": "127.0.0.1", "PORT": str(port), "LAB_SERVICE_NAME": "product",
           "LAB_HOSTS_FILE": str(tmp_path / "hosts"), **extra}
    return subprocess.Popen([sys.executable, "-m", "rotate_lab.shop.sample_service"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_rejected_token_exits_non_zero_with_a_clear_line(
        tmp_path: Path, config_center: tuple[State, int, str]) -> None:
    _, cc_port, _ = config_center
    bad = "cct_definitely-not-valid-token-value"
    proc = run_service(tmp_path, cc_port, bad, free_port(), LAB_BOOTSTRAP_DEADLINE="1")
    try:
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 1
    assert "bootstrap failed: HTTP 401 (machine token rejected)" in out
    assert bad not in out


def test_sigterm_stops_it_promptly_with_status_0(
        tmp_path: Path, config_center: tuple[State, int, str]) -> None:
    _, cc_port, token = config_center
    port = free_port()
    proc = run_service(tmp_path, cc_port, token, port)
    try:
        def healthy() -> bool | None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            try:
                conn.request("GET", "/readyz")  # no dragonfly section: ready on a valid token
                return conn.getresponse().status == 200 or None
            finally:
                conn.close()

        eventually(healthy, 10, "service ready")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=5)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "stopped" in out and token not in out


def test_without_a_config_center_it_reads_its_secret_from_env_or_a_file(
        tmp_path: Path) -> None:
    """A workload that reads its Secret itself: the document comes from its environment; a
    password file is read afresh on every login (the kubelet's refresh reaches it)."""
    from rotate_lab.shop.sample_bootstrap import document_from_env
    from rotate_lab.shop.sample_dragonfly import Dragonfly
    from rotate_lab.shop.sample_service import resolve

    host = {"DRAGONFLY_HOST": "dragonfly.dragonfly.svc.cluster.local"}
    assert document_from_env({**host, "DRAGONFLY_PASSWORD": "p1"}) == {
        "dragonfly": {"host": host["DRAGONFLY_HOST"], "port": 6379, "password": "p1"}}
    assert document_from_env({"DRAGONFLY_PASSWORD": "p1"}) is None  # no Dragonfly named
    assert document_from_env({**host, "CONFIG_CENTER_URL": "http://cc"}) is None
    pw = tmp_path / "DRAGONFLY_PASSWORD"
    pw.write_text("first\n")
    doc = document_from_env({**host, "DRAGONFLY_PASSWORD_FILE": str(pw)})
    assert doc is not None
    conn = Dragonfly(doc["dragonfly"], resolve)
    assert conn._auth() == [("AUTH", "first")]
    pw.write_text("second")
    assert conn._auth() == [("AUTH", "second")]
