"""``pods/NAME/portforward`` of the lab's API server, with the two real clients: rotate's
PortForwards (the official Python client's websocket, v4.channel.k8s.io) and the unmodified
``kubectl port-forward`` binary (SPDY/3.1, after its websocket tunnel is refused).

The pod is a Pod object whose IP is 127.0.0.1, where a test echo server listens: the relay
binds to the pod's IP and connects to the port, as it does for the lab's pods.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rotate.clients.kube import KubeClient
from rotate.core.errors import ForbiddenError, TemporaryError
from tests.support.apiserver import ApiLab
from tests.support.polling import eventually
from tests.support.port_forward import KUBECTL, kubectl_port_forward

NS = "pf"


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture(scope="module")
def echo_port() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _pod(name: str, phase: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "echo"}]},
            "status": {"phase": phase, "podIP": "127.0.0.1"}}


@pytest.fixture(scope="module")
def pods(apiserver: ApiLab) -> str:
    apiserver.store.load_manifests([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    for name, phase in (("echo", "Running"), ("pending", "Pending")):
        apiserver.store.create("Pod", _pod(name, phase))
        apiserver.store.update("Pod", _pod(name, phase), subresource="status")
    return NS


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def _streams(apiserver: ApiLab, framing: str) -> int:
    doc = apiserver.server.request_counts()
    return sum(f["streams"] for f in doc["port_forwards"]
               if f["pod"] == "echo" and f["framing"] == framing)


def test_rotate_relays_each_connection_over_a_websocket_stream(
        apiserver: ApiLab, pods: str, echo_port: int) -> None:
    kube = KubeClient(kubeconfig=str(apiserver.kubeconfig), context="lab")
    before = _streams(apiserver, "websocket")
    try:
        endpoint = kube.port_forward(pods, "echo", echo_port)
        assert endpoint.host == "127.0.0.1"
        assert kube.port_forward(pods, "echo", echo_port) == endpoint  # one listener, kept
        big = os.urandom(300_000)  # several websocket messages each way
        assert _exchange(endpoint.port, big) == big
        assert _exchange(endpoint.port, b"second connection") == b"second connection"
        # the listener's check, then one stream per connection
        assert _streams(apiserver, "websocket") - before == 3
    finally:
        kube.close_forwards()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", endpoint.port), timeout=2).close()
    kube.close()


def test_rotate_translates_refusals(apiserver: ApiLab, pods: str, echo_port: int,
                                    tmp_path: Path) -> None:
    kube = KubeClient(kubeconfig=str(apiserver.kubeconfig), context="lab")
    try:
        with pytest.raises(TemporaryError, match=r"pod pf/ghost port .* gone"):
            kube.port_forward(pods, "ghost", echo_port)
        with pytest.raises(TemporaryError, match="pod pf/pending port"):
            kube.port_forward(pods, "pending", echo_port)
    finally:
        kube.close()
    wrong = tmp_path / "kubeconfig"
    config = json.loads(apiserver.kubeconfig.read_text())  # the lab writes it as JSON
    for user in config["users"]:
        user["user"]["token"] = "not-a-token"
    wrong.write_text(json.dumps(config))
    kube = KubeClient(kubeconfig=str(wrong), context="lab")
    try:
        with pytest.raises(ForbiddenError, match="credentials"):
            kube.port_forward(pods, "echo", echo_port)
    finally:
        kube.close()


def test_a_port_nothing_listens_on_ends_the_connection(apiserver: ApiLab, pods: str) -> None:
    with socket.socket() as probe:  # a free port: nothing listens there
        probe.bind(("127.0.0.1", 0))
        free = int(probe.getsockname()[1])
    kube = KubeClient(kubeconfig=str(apiserver.kubeconfig), context="lab")
    try:
        endpoint = kube.port_forward(pods, "echo", free)
        assert _exchange(endpoint.port, b"hello") == b""  # closed: the driver's "unreachable"
    finally:
        kube.close()


@contextlib.contextmanager
def kubectl_forward(apiserver: ApiLab, *args: str) -> Iterator[int]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(apiserver.kubeconfig.parent)  # discovery cache inside the test's tmp
    with kubectl_port_forward(["--kubeconfig", str(apiserver.kubeconfig), "--context", "lab",
                               "port-forward", *args], env) as port:
        yield port


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_port_forward_over_spdy(apiserver: ApiLab, pods: str, echo_port: int) -> None:
    before = _streams(apiserver, "spdy")
    with kubectl_forward(apiserver, "-n", pods, "pod/echo", f":{echo_port}") as port:
        big = os.urandom(300_000)
        assert _exchange(port, big) == big
        # concurrent connections share kubectl's one SPDY connection, a stream pair each
        with socket.create_connection(("127.0.0.1", port), timeout=10) as a, \
                socket.create_connection(("127.0.0.1", port), timeout=10) as b:
            a.sendall(b"first")
            b.sendall(b"second")
            assert b.recv(100) == b"second"
            assert a.recv(100) == b"first"
    eventually(lambda: _streams(apiserver, "spdy") - before == 3, timeout=10,
               what="three SPDY stream pairs recorded")


def test_the_portforward_drop_fault_ends_open_streams_and_refuses_new_ones(
        apiserver: ApiLab, pods: str, echo_port: int) -> None:
    """What the lab fault ``portforward-drop`` does (the cluster process wires it to
    ``DIR/faults.json``): a stream in use ends — the driver sees its connection closed —
    and a new one is refused (500), until the fault is cleared."""
    dropped = threading.Event()
    apiserver.server.forwards_dropped = dropped.is_set
    kube = KubeClient(kubeconfig=str(apiserver.kubeconfig), context="lab")
    try:
        endpoint = kube.port_forward(pods, "echo", echo_port)
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as conn:
            conn.sendall(b"before")
            assert conn.recv(100) == b"before"
            dropped.set()
            assert conn.recv(100) == b""  # the relay notices within its poll (0.5 s)
        # accepted, then closed or reset: the driver's "unreachable"
        with contextlib.suppress(ConnectionResetError):
            assert _exchange(endpoint.port, b"during") == b""
        kube.close_forwards()
        with pytest.raises(TemporaryError, match="HTTP 500"):
            kube.port_forward(pods, "echo", echo_port)
        dropped.clear()
        endpoint = kube.port_forward(pods, "echo", echo_port)
        assert _exchange(endpoint.port, b"after") == b"after"
    finally:
        apiserver.server.forwards_dropped = lambda: False
        kube.close()
