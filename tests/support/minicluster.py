"""A small in-process cluster for the workload tests: the real Store, the real controllers and
the real kubelet running real processes (redis-server, the sample service) in a temp dir.

``running_cluster`` (behind the ``cluster`` fixture of tests/lab/conftest.py) yields a
:class:`MiniCluster`; on exit it stops the kubelet first (which kills every pod process and
waits for it), then the controllers — and checks that no pod process outlived it.  Each
cluster takes a ``127.N.0.0/16`` block with no listening socket (``choose_octet``), so other
labs and test runs on the same machine do not collide on ClusterIP:port.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from rotate_lab.cluster.api.store import ApiError, Store
from rotate_lab.cluster.context import LabContext, Network, Profile, Resolver
from rotate_lab.cluster.controllers.base import Controller
from rotate_lab.cluster.controllers.deployment import DeploymentController
from rotate_lab.cluster.controllers.replicaset import ReplicaSetController
from rotate_lab.cluster.controllers.services import ServiceController
from rotate_lab.cluster.controllers.statefulset import StatefulSetController
from rotate_lab.cluster.node.kubelet import Kubelet
from rotate_lab.faults import Faults
from rotate_lab.kubeproxy.embedded import EmbeddedProxy

from tests.support.polling import eventually

T = TypeVar("T")
Obj = dict[str, Any]

PASSWORD = "Zx9pLq2VwR7mKd4TfH8sJc3N"  # test value; looked for in argv and logs
DRAGONFLY_IMAGE = "docker.dragonflydb.io/dragonflydb/dragonfly:v1.21.2"
SHOP_IMAGE = "registry.example/shop-service:1.0"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def rollout_complete(d: Obj) -> bool:
    """kubectl's DeploymentStatusViewer rules for "successfully rolled out"."""
    st, want = d.get("status") or {}, d["spec"].get("replicas", 1)
    progressing: Obj = next((c for c in st.get("conditions") or []
                             if c["type"] == "Progressing"), {})
    assert progressing.get("reason") != "ProgressDeadlineExceeded", "deadline exceeded"
    return bool(st.get("observedGeneration", 0) >= d["metadata"]["generation"]
            and st.get("updatedReplicas", 0) == want
            and st.get("replicas", 0) == st.get("updatedReplicas", 0)
            and st.get("availableReplicas", 0) == st.get("updatedReplicas", 0))


@dataclass
class MiniCluster:
    ctx: LabContext
    kubelet: Kubelet
    services: ServiceController
    controllers: list[Controller] = field(default_factory=list)
    proxy: EmbeddedProxy | None = None

    @property
    def store(self) -> Store:
        return self.ctx.store

    def apply(self, *objs: Obj) -> None:
        for obj in objs:
            kind = obj["kind"]
            if kind == "Namespace":
                try:
                    self.store.create(kind, obj)
                except ApiError as exc:
                    if exc.reason != "AlreadyExists":
                        raise
                continue
            self.store.create(kind, obj)

    def get(self, kind: str, ns: str, name: str) -> Obj:
        return self.store.get(kind, ns, name)

    def pods(self, ns: str, selector: str | None = None, *,
             terminating: bool = False) -> list[Obj]:
        """The pods, without those being deleted (``Terminating``) unless ``terminating``:
        a completed rollout may leave old pods still stopping, as in Kubernetes."""
        pods = self.store.list("Pod", ns, label_selector=selector)[0]
        return [p for p in pods
                if terminating or not p["metadata"].get("deletionTimestamp")]

    def wait_rollout(self, ns: str, name: str, timeout: float = 15) -> Obj:
        def done() -> Obj | None:
            d = self.get("Deployment", ns, name)
            return d if rollout_complete(d) else None
        return eventually(done, timeout, f"deployment {ns}/{name} rolled out")

    def set_fault(self, kind: str, value: Any) -> None:
        path = self.ctx.dir / "faults.json"
        data = {}
        if path.exists():
            import json
            data = json.loads(path.read_text() or "{}")
        data[kind] = value
        Faults.write(path, data)

    def pids(self) -> dict[str, int]:
        import json
        path = self.ctx.dir / "pods.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def stop(self) -> None:
        self.kubelet.stop()
        for c in self.controllers:
            c.stop()
        if self.proxy is not None:
            self.proxy.stop()
        self.ctx.stop.set()


def start_cluster(tmp: Path) -> MiniCluster:
    from rotate_lab.cluster.context import choose_octet

    octet = choose_octet()  # other labs may run on this machine: take a free 127.N/16
    tmp.mkdir(parents=True, exist_ok=True)
    ctx = LabContext(store=Store(), dir=tmp, profile=Profile.named("fast"),
                     faults=Faults(tmp / "faults.json"), network=Network(octet),
                     resolver=Resolver(tmp / "hosts"))
    services = ServiceController(ctx)
    controllers: list[Controller] = [services, DeploymentController(ctx),
                                     ReplicaSetController(ctx), StatefulSetController(ctx)]
    kubelet = Kubelet(ctx)
    for c in [*controllers, kubelet]:
        c.start()
    # ClusterIP traffic: the kube-proxy's forwarder, fed from the store (no API server here).
    proxy = EmbeddedProxy(ctx.store).start()
    return MiniCluster(ctx, kubelet, services, controllers, proxy)


@contextmanager
def running_cluster(tmp: Path) -> Iterator[MiniCluster]:
    """A MiniCluster in ``tmp``; on exit the kubelet stops first, and no pod process may
    outlive it."""
    mc = start_cluster(tmp)
    try:
        yield mc
    finally:
        pids = list(mc.pids().values())
        mc.stop()
        left = [p for p in pids if pid_alive(p)]
        assert not left, f"pod processes outlived the kubelet: {left}"


# -- manifests ---------------------------------------------------------------------------------


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def secret(ns: str, name: str, data: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def service(ns: str, name: str, ports: list[Obj], selector: dict[str, str] | None) -> Obj:
    spec: Obj = {"ports": ports}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def dragonfly_container(probe: Obj | None = None) -> Obj:
    """The real manifest's shape: password from the Secret, ``$(VAR)`` in args."""
    return {
        "name": "dragonfly", "image": DRAGONFLY_IMAGE,
        "args": ["--requirepass", "$(DRAGONFLY_PASSWORD)", "--port", "6379",
                 "--logtostderr", "--proactor_threads=1"],
        "env": [{"name": "DRAGONFLY_PASSWORD", "valueFrom": {"secretKeyRef": {
            "name": "dragonfly-password-secret", "key": "password"}}}],
        "ports": [{"name": "redis", "containerPort": 6379}],
        "readinessProbe": probe or {"tcpSocket": {"port": "redis"}, "periodSeconds": 1},
    }


def deployment(ns: str, name: str, containers: list[Obj], replicas: int = 1,
               **spec_extra: Any) -> Obj:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": containers}},
                 **spec_extra},
    }


def dragonfly_objects(replicas: int = 1, **spec_extra: Any) -> list[Obj]:
    return [
        namespace("dragonfly"),
        secret("dragonfly", "dragonfly-password-secret", {"password": PASSWORD}),
        deployment("dragonfly", "dragonfly", [dragonfly_container()], replicas, **spec_extra),
        service("dragonfly", "dragonfly", [{"name": "redis", "port": 6379,
                                            "targetPort": "redis"}], {"app": "dragonfly"}),
    ]


def resp(host: str, port: int, *commands: list[str], timeout: float = 2.0) -> list[bytes]:
    """Send RESP commands on one connection; the first reply line of each."""
    import socket

    out = []
    with socket.create_connection((host, port), timeout=timeout) as s:
        f = s.makefile("rb")
        for cmd in commands:
            payload = f"*{len(cmd)}\r\n".encode() + b"".join(
                f"${len(a.encode())}\r\n".encode() + a.encode() + b"\r\n" for a in cmd)
            s.sendall(payload)
            line = f.readline().rstrip(b"\r\n")
            if line.startswith(b"$") and int(line[1:]) >= 0:
                line = f.readline().rstrip(b"\r\n")
            out.append(line)
    return out


def restart_patch(stamp: str) -> Obj:
    """What ``kubectl rollout restart`` sends (as a strategic merge patch)."""
    return {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": stamp}}}}}


class ThreadedServer:
    """Run a ThreadingHTTPServer in a thread; ``close()`` stops it."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, kwargs={
            "poll_interval": 0.1}, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@contextmanager
def kubectl_over(cluster: MiniCluster, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Real kubectl against the lab API server over this cluster's store, stopped on exit."""
    from rotate_lab.cluster.api import kubeconfig, tls
    from rotate_lab.cluster.api.apiserver import ApiServer
    from rotate_lab.cluster.api.auth import Identity

    material = tls.generate()
    server = ApiServer(cluster.store, tls=material, identities={
        "admin-t": Identity.admin(), "restricted-t": Identity.restricted()},
        proxy=cluster.services.proxy_target).start()
    config = kubeconfig.write(tmp_path / "kubeconfig", server.url, material.ca_pem, "admin-t",
                              "restricted-t")

    def run(*args: str, ok: bool = True) -> str:
        done = subprocess.run(["kubectl", "--kubeconfig", str(config), *args],
                              capture_output=True, text=True, timeout=30, check=False)
        if ok:
            assert done.returncode == 0, done.stderr
        else:
            assert done.returncode != 0, done.stdout
        return done.stdout + done.stderr

    try:
        yield run
    finally:
        server.stop()
