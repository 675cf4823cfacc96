"""Providers reached through the API server's port-forward, as ``kubectl port-forward`` does.

Outside the cluster a provider's ClusterIP and pod IPs are not routable; the API server is.
:class:`PortForwards` opens, per ``(namespace, pod, port)``, one listener on ``127.0.0.1``
(an ephemeral port) and relays each connection accepted there over a port-forward stream of
its own to the pod (``pods/portforward``: the official client's websocket port-forward,
``kubernetes.stream.ws_client.portforward_call``, speaking ``v4.channel.k8s.io``).  The
drivers (redis-py, psycopg, a plug-in's) are handed the listener's address and never know.

Why ``portforward_call`` and not ``kubernetes.stream.portforward`` over
``CoreV1Api.connect_get_namespaced_pod_portforward``: that wrapper only builds the same URL
and headers, but importing ``CoreV1Api`` builds the client's whole pydantic model set — 7 to
14 s measured on a loaded 2-core machine, every run.  The request is serialised by the
KubeClient's own ApiClient (``param_serialize``: the URL and the bearer token, refreshed as
for every request), then handed to the client's websocket port-forward.

Invariants:

* Loopback only: the listener binds ``127.0.0.1``, never a routable address — whoever can
  connect to it reaches the provider with rotate's Kubernetes identity.
* One stream per connection, as kubectl does: a dropped stream ends that connection only
  (the driver sees it closed: unreachable, retried), never the listener.
* The first stream is opened before the address is handed out, so that a refusal (no
  ``pods/portforward`` permission, the pod gone) is a translated error naming the pod, the
  port and the fix — not a connection the driver sees closed.
* :meth:`PortForwards.close` (the end of a run) closes every listener and every stream.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from rotate.clients.seams import Endpoint
from rotate.core.errors import ClientError, ForbiddenError, TemporaryError

SYSTEM = "kubernetes"
LOOPBACK = "127.0.0.1"
#: bytes read per relay call
CHUNK = 64 * 1024
#: a relay wakes this often to notice that its listener was closed
POLL = 0.5
_HANDSHAKE = re.compile(r"Handshake status (\d{3})")


def _status_of(exc: BaseException) -> int:
    """The HTTP status of a refused upgrade (websocket-client's message starts with it), 0
    when the stream never reached an answer.  Only the number is taken from the text."""
    match = _HANDSHAKE.search(str(getattr(exc, "reason", "") or ""))
    return int(match.group(1)) if match else 0


def _fix(namespace: str) -> str:
    return (f"grant create and get on pods/portforward in namespace {namespace} "
            "(`rotate rbac` prints it), or set the provider's addressEnv to an address "
            "reachable from here")


@dataclass
class _Listener:
    namespace: str
    pod: str
    port: int
    sock: socket.socket
    closed: threading.Event = field(default_factory=threading.Event)
    streams: set[Any] = field(default_factory=set)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(LOOPBACK, int(self.sock.getsockname()[1]))

    def __str__(self) -> str:
        return f"pod {self.namespace}/{self.pod} port {self.port}"


class PortForwards:
    """The port-forward listeners of one run (see the module docstring)."""

    def __init__(self, api_client: Any) -> None:
        self._api = api_client  # the KubeClient's: it serialises (URL, token), never sends
        self._lock = threading.Lock()
        self._listeners: dict[tuple[str, str, int], _Listener] = {}

    def endpoint(self, namespace: str, pod: str, port: int) -> Endpoint:
        """The loopback address relaying to ``pod``'s ``port``; opened on first use and kept
        until :meth:`close`.  ForbiddenError without the permission; TemporaryError for a pod
        gone or not running (a restart: the next attempt resolves the Service again) and
        when the API server cannot be reached."""
        key = (namespace, pod, port)
        with self._lock:
            found = self._listeners.get(key)
            if found is not None and not found.closed.is_set():
                return found.endpoint
        listener = self._open(namespace, pod, port)
        with self._lock:
            found = self._listeners.get(key)
            if found is None or found.closed.is_set():
                self._listeners[key] = listener
                return listener.endpoint
        self._close_listener(listener)  # another thread opened one meanwhile: use that
        return found.endpoint

    def close(self) -> None:
        with self._lock:
            listeners = list(self._listeners.values())
            self._listeners.clear()
        for listener in listeners:
            self._close_listener(listener)

    # ------------------------------------------------------------------ internals

    def _open(self, namespace: str, pod: str, port: int) -> _Listener:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, 0))
        sock.listen(16)
        listener = _Listener(namespace, pod, port, sock)
        try:
            first = self._stream(listener)  # refusals surface here, translated
        except ClientError:
            sock.close()
            raise
        first.close()
        threading.Thread(target=self._accept, args=(listener,), daemon=True,
                         name=f"rotate-port-forward {listener}").start()
        return listener

    def _stream(self, listener: _Listener) -> Any:
        """One port-forward stream to the listener's pod and port (its own websocket)."""
        from kubernetes.client.exceptions import ApiException
        from kubernetes.stream.ws_client import portforward_call

        operation = f"port-forward to {listener}"
        path = (f"/api/v1/namespaces/{quote(listener.namespace, safe='')}/pods/"
                f"{quote(listener.pod, safe='')}/portforward")
        try:
            _, url, headers, _, _ = self._api.param_serialize(
                "GET", path, query_params=[("ports", str(listener.port))],
                auth_settings=["BearerToken"])
            stream = portforward_call(  # type: ignore[no-untyped-call]
                self._api.configuration, "GET", url, headers=headers)
        except ApiException as exc:
            status = _status_of(exc)
            if status == 401:
                raise ForbiddenError(SYSTEM, operation, "the API server refused rotate's "
                                     "credentials", status=401) from None
            if status == 403:
                raise ForbiddenError(SYSTEM, operation,
                                     f"not allowed: {_fix(listener.namespace)}",
                                     status=status) from None
            if status == 404:  # deleted since the Endpoints named it: retried, re-resolved
                raise TemporaryError(SYSTEM, operation, "the pod is gone (a restart "
                                     "replaces it: the next attempt resolves the Service "
                                     "again)", status=404) from None
            if status == 400:  # the pod is not running (yet): a restart may bring it back
                raise TemporaryError(SYSTEM, operation, "the pod is not running",
                                     status=400) from None
            raise TemporaryError(SYSTEM, operation,
                                 f"the API server refused the stream (HTTP {status})"
                                 if status else "the API server cannot be reached") from None
        except OSError:
            raise TemporaryError(SYSTEM, operation,
                                 "the API server cannot be reached") from None
        return stream

    def _accept(self, listener: _Listener) -> None:
        while not listener.closed.is_set():
            try:
                conn, _ = listener.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(listener, conn), daemon=True,
                             name=f"rotate-port-forward-conn {listener}").start()

    def _serve(self, listener: _Listener, conn: socket.socket) -> None:
        """Relay one accepted connection over a stream of its own; either side closing
        closes both (the driver then sees the connection end, as with a dropped TCP)."""
        try:
            stream = self._stream(listener)
        except ClientError:
            conn.close()  # the driver sees the connection closed: unreachable, retried
            return
        with self._lock:
            listener.streams.add(stream)
        remote = stream.socket(listener.port)
        try:
            _relay(conn, remote, listener.closed)
        finally:
            with self._lock:
                listener.streams.discard(stream)
            with contextlib.suppress(OSError):
                conn.close()
            with contextlib.suppress(OSError):
                stream.close()

    def _close_listener(self, listener: _Listener) -> None:
        listener.closed.set()
        with contextlib.suppress(OSError):  # wakes the accept() blocked on it (Linux)
            listener.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            listener.sock.close()
        with self._lock:
            streams = list(listener.streams)
        for stream in streams:
            with contextlib.suppress(OSError):
                stream.close()


def _relay(a: socket.socket, b: Any, closed: threading.Event) -> None:
    """Copy bytes both ways until either side ends (or the listener is closed)."""
    pair = {a.fileno(): (a, b), b.fileno(): (b, a)}
    while not closed.is_set():
        try:
            readable, _, _ = select.select(list(pair), [], [], POLL)
        except (OSError, ValueError):
            return
        for fd in readable:
            src, dst = pair[fd]
            try:
                data = src.recv(CHUNK)
                if not data:
                    return
                dst.sendall(data)
            except OSError:
                return
