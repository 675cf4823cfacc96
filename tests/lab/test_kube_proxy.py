"""The lab's kube-proxy: ClusterIP traffic is carried by its own process, not the cluster's.

Uses the session lab.  The Endpoints test adds a selector-less Service whose Endpoints point
at two TCP servers of this test (each answers with its own tag), so that which endpoint a
connection reached is visible without touching the shop's workloads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rotate_lab import control
from rotate_lab.control import launch
from rotate_lab.control.labdir import LabDir
from rotate_lab.host import processes

from tests.support.labhandle import LabHandle
from tests.support.polling import eventually

NS, SVC, PORT = "default", "kproxy-probe", 7000


def _listening_inode(ip: str, port: int) -> str | None:
    """The socket inode listening on ip:port, from /proc/net/tcp (little-endian hex IP)."""
    hex_ip = "".join(f"{int(b):02X}" for b in reversed(ip.split(".")))
    want = f"{hex_ip}:{port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == want and fields[3] == "0A":  # 0A = LISTEN
            return fields[9]
    return None


def _socket_inodes(pid: int) -> set[str]:
    out: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[len("socket:["):-1])
    return out


def test_cluster_ips_are_carried_by_the_kube_proxy_process(lab: LabHandle) -> None:
    pids = json.loads((lab.dir / "pids.json").read_text())
    proxy_pid, cluster_pid = int(pids["kube_proxy"]), int(pids["cluster"])
    assert proxy_pid != cluster_pid
    assert "rotate_lab.kubeproxy" in (processes.cmdline(proxy_pid) or "")
    st = control.status(lab.dir)
    assert st["parts"]["kube_proxy"]["pid"] == proxy_pid and st["parts"]["kube_proxy"]["healthy"]
    host, _, port = st["parts"]["dragonfly"]["addr"].rpartition(":")
    inode = _listening_inode(host, int(port))
    assert inode is not None, "nothing listens on Dragonfly's ClusterIP"
    assert inode in _socket_inodes(proxy_pid)
    assert inode not in _socket_inodes(cluster_pid)


class _Tagged(socketserver.ThreadingTCPServer):
    """Answers every line it reads with ``TAG:line`` — which endpoint served the connection."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, tag: str) -> None:
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    self.wfile.write(outer.tag + b":" + line)

        super().__init__(("127.0.0.1", 0), Handler)
        self.tag = tag.encode()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


def _apply(lab: LabHandle, obj: dict[str, Any]) -> None:
    proc = subprocess.run(["kubectl", "apply", "-f", "-"], input=json.dumps(obj), text=True,
                          env=lab.process_env, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


def _endpoints(port: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"namespace": NS, "name": SVC},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                         "ports": [{"name": "tcp", "port": port}]}]}


def _ask(conn: socket.socket, word: bytes) -> bytes:
    conn.sendall(word + b"\n")
    return conn.makefile("rb").readline().strip()


def _served_by(ip: str) -> bytes:
    with socket.create_connection((ip, PORT), timeout=5) as conn:
        return _ask(conn, b"hi")


@pytest.fixture
def probe_service(lab: LabHandle) -> Iterator[tuple[_Tagged, _Tagged]]:
    a, b = _Tagged("A"), _Tagged("B")
    try:
        yield a, b
    finally:
        lab.kubectl("delete", "service,endpoints", "-n", NS, SVC, "--ignore-not-found")
        a.shutdown()
        b.shutdown()
        a.server_close()
        b.server_close()


def test_an_endpoints_change_reaches_the_next_connection_not_an_established_one(
        lab: LabHandle, probe_service: tuple[_Tagged, _Tagged]) -> None:
    a, b = probe_service
    _apply(lab, {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": NS,
                                                                     "name": SVC},
                 "spec": {"ports": [{"name": "tcp", "port": PORT, "protocol": "TCP"}]}})
    _apply(lab, _endpoints(a.port))
    ip = eventually(lambda: lab.kjson("get", "service", "-n", NS, SVC)["spec"].get("clusterIP"),
                    10, "a ClusterIP")
    eventually(lambda: _served_by(ip) == b"A:hi", 10, "the proxy to route to endpoint A")
    with socket.create_connection((ip, PORT), timeout=5) as established:
        assert _ask(established, b"before") == b"A:before"
        _apply(lab, _endpoints(b.port))  # the rollout: A leaves, B arrives
        eventually(lambda: _served_by(ip) == b"B:hi", 10, "a new connection to reach B")
        assert _served_by(ip) == b"B:hi"  # and every one after it
        assert _ask(established, b"after") == b"A:after"  # established: still A
    lab.kubectl("delete", "endpoints", "-n", NS, SVC)
    # No Ready endpoint: the proxy accepts and closes at once (no answer, no hang); our
    # unread request makes that close a reset, as it did with the thread-based forwarder.
    eventually(lambda: _refused_answer(ip), 10, "connections to be closed")


def _refused_answer(ip: str) -> bool:
    try:
        return _served_by(ip) == b""
    except ConnectionResetError:
        return True


def test_status_shows_a_dead_kube_proxy_and_a_restarted_one_serves_again(
        lab: LabHandle) -> None:
    d = LabDir(lab.dir)
    rec = next(r for r in d.recorded() if r.part == "kube_proxy")
    assert processes.signal_pid(rec, signal.SIGKILL)
    assert processes.wait_gone([rec.pid], deadline=_in(10)) == []
    st = control.status(lab.dir)
    assert st["running"] is False
    assert st["parts"]["kube_proxy"]["pid"] is None
    assert st["parts"]["kube_proxy"]["healthy"] is False
    # Restarting it (what `up` does) restores ClusterIP traffic and the lab's health.
    launch.start_kube_proxy(d)
    st = control.status(lab.dir)
    assert st["running"] is True and st["parts"]["kube_proxy"]["healthy"]
    assert st["parts"]["dragonfly"]["healthy"]
    # Pods whose readiness went through Dragonfly's ClusterIP recover: leave the lab Ready.
    eventually(lambda: control.not_ready(d) == [], 60, "every workload Ready again")


def _in(seconds: float) -> float:
    return time.monotonic() + seconds
