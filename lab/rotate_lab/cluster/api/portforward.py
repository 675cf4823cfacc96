"""``pods/NAME/portforward``: the API server relays TCP to a pod, as kubectl and the Python
client expect.

Two framings reach the same relay (:class:`Session`):

- **websocket** (``GET`` with ``Upgrade: websocket``; what the official Python client's
  ``kubernetes.stream.portforward`` sends): subprotocol ``v4.channel.k8s.io`` (or the
  unnamed one).  Every message is one channel byte and data; for port *i* of ``?ports=``
  channel ``2i`` carries data and ``2i+1`` errors, and the server's first message on each
  channel is the port number, two bytes little-endian.  Framing by ``wsproto`` (sans-IO).
- **SPDY/3.1** (kubectl): :mod:`rotate_lab.cluster.api.spdy`.

Where a connection comes from: on a real node the kubelet enters the pod's network
namespace and connects to ``localhost:PORT``, so the server sees a port-forwarded client as
coming from inside its own pod.  The lab's pods share the host's loopback, so the relay binds
its socket to the pod's own IP before connecting to it: a provider that logs its clients
(PostgreSQL's ``log_connections``) sees a port-forwarded one come from its own address, and
one that came through the kube-proxy or straight to the pod IP from ``127.0.0.1``.  That is
how a test proves which path rotate took (docs/lab.md "Port-forward").
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.utilities import generate_accept_token

from rotate_lab.cluster.api.apierrors import ApiError, bad_request

#: websocket subprotocols served, in the server's order of preference ("" = none offered)
WS_PROTOCOLS = ("v4.channel.k8s.io", "channel.k8s.io", "")
CONNECT_TIMEOUT = 5.0
CHUNK = 64 * 1024
#: the relay wakes this often to notice that the server stops
POLL = 0.5


@dataclass(frozen=True)
class Target:
    """The pod a port-forward reaches: its IP, and the ports asked for (in order)."""

    namespace: str
    pod: str
    ip: str
    ports: tuple[int, ...]


def parse_ports(values: list[str]) -> tuple[int, ...]:
    """``?ports=5432&ports=6379`` or ``?ports=5432,6379`` → (5432, 6379); 400 otherwise."""
    ports: list[int] = []
    for value in values:
        for part in value.split(","):
            if not part.strip().isdigit() or not 0 < int(part) < 65536:
                raise bad_request(f"invalid port {part.strip()!r}")
            ports.append(int(part))
    return tuple(ports)


def target_of(pod: dict[str, Any], ports: tuple[int, ...]) -> Target:
    """The pod's IP once it runs; 400 as the real server answers for a pod not running."""
    md, status = pod["metadata"], pod.get("status") or {}
    ip = status.get("podIP")
    if status.get("phase") != "Running" or not ip:
        raise bad_request(f"pod {md['name']} is not running (phase "
                          f"{status.get('phase') or 'Pending'})")
    return Target(md["namespace"], md["name"], str(ip), ports)


def connect(target: Target, port: int) -> socket.socket:
    """A connection to the pod's port, from the pod's own address (see the module doc)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((target.ip, 0))
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect((target.ip, port))
        sock.settimeout(None)
    except OSError:
        sock.close()
        raise
    return sock


def connect_error(target: Target, port: int, exc: OSError) -> str:
    """The message kubelet writes on the error channel (its wording)."""
    return (f"error forwarding port {port} to pod {target.pod}: failed to connect to "
            f"localhost:{port} inside namespace {target.namespace}: "
            f"{exc.strerror or type(exc).__name__}")


def choose_protocol(offered: str | None) -> str:
    names = [p.strip() for p in (offered or "").split(",") if p.strip()]
    for known in WS_PROTOCOLS:
        if (known in names) or (not known and not names):
            return known
    raise bad_request("none of the websocket subprotocols offered is served "
                      f"(served: {', '.join(p for p in WS_PROTOCOLS if p)})")


def upgrade_response(key: str, protocol: str) -> bytes:
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket",
             "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {generate_accept_token(key.encode()).decode()}"]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def recv_all(sock: socket.socket) -> bytes:
    """What is readable now; for TLS also the bytes already decrypted (``pending``), which
    ``select`` cannot see.  b"" at the end of the stream."""
    data = sock.recv(CHUNK)
    if data and isinstance(sock, ssl.SSLSocket):
        while sock.pending():
            more = sock.recv(CHUNK)
            if not more:
                break
            data += more
    return data


class WebSocketForward:
    """One websocket port-forward session: relays until either side ends.

    ``client`` is the upgraded (TLS) connection; the 101 answer is already sent.  One pod
    connection per port, opened at the start (the kubelet's websocket handler does the
    same); a port that cannot be connected gets the kubelet's message on its error channel
    and the session ends."""

    def __init__(self, client: socket.socket, target: Target,
                 stopping: Callable[[], bool]) -> None:
        self.client = client
        self.target = target
        self.stopping = stopping
        self.ws = Connection(ConnectionType.SERVER)
        self.pods: dict[int, socket.socket] = {}  # data channel → pod connection
        self._message = bytearray()

    def _send(self, channel: int, data: bytes) -> None:
        self.client.sendall(self.ws.send(BytesMessage(data=bytes([channel]) + data)))

    def run(self) -> None:
        try:
            for i, port in enumerate(self.target.ports):
                self._send(2 * i, port.to_bytes(2, "little"))
                self._send(2 * i + 1, port.to_bytes(2, "little"))
            for i, port in enumerate(self.target.ports):
                try:
                    self.pods[2 * i] = connect(self.target, port)
                except OSError as exc:
                    self._send(2 * i + 1, connect_error(self.target, port, exc).encode())
                    return
            self._relay()
        finally:
            for sock in self.pods.values():
                with contextlib.suppress(OSError):
                    sock.close()
            with contextlib.suppress(Exception):  # the client may be gone, or closed first
                self.client.sendall(self.ws.send(CloseConnection(code=1000)))

    def _relay(self) -> None:
        by_fd = {sock.fileno(): (ch, sock) for ch, sock in self.pods.items()}
        while not self.stopping():
            readable, _, _ = select.select([self.client, *(s for _, s in by_fd.values())],
                                           [], [], POLL)
            if self.client in readable or (isinstance(self.client, ssl.SSLSocket)
                                           and self.client.pending()):
                data = recv_all(self.client)
                if not data:
                    return
                self.ws.receive_data(data)
                if not self._client_events():
                    return
            for sock in readable:
                if sock is self.client:
                    continue
                channel, pod = by_fd[sock.fileno()]
                data = pod.recv(CHUNK)
                if not data:
                    return  # the server closed: the whole stream ends, as kubelet does
                self._send(channel, data)

    def _client_events(self) -> bool:
        """Handle what the client sent; False when it closed."""
        for event in self.ws.events():
            if isinstance(event, CloseConnection):
                with contextlib.suppress(Exception):
                    self.client.sendall(self.ws.send(event.response()))
                return False
            if isinstance(event, Ping):
                self.client.sendall(self.ws.send(event.response()))
            elif isinstance(event, BytesMessage | TextMessage):
                self._message += (event.data if isinstance(event, BytesMessage)
                                  else event.data.encode())
                if event.message_finished:
                    self._deliver(bytes(self._message))
                    self._message.clear()
        return True

    def _deliver(self, message: bytes) -> None:
        if not message:
            return
        channel, data = message[0], message[1:]
        pod = self.pods.get(channel)
        if pod is None:
            raise ApiError(400, "BadRequest", f"unexpected channel {channel}")
        if data:
            pod.sendall(data)
