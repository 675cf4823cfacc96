"""The lab's Kubernetes API server: HTTPS + bearer tokens over the :class:`Store`.

Faithful enough that unmodified kubectl and the official Python client work: discovery,
CRUD at namespaced and all-namespaces paths, status/scale subresources, the three patch
types, ``watch=true`` streams (chunked, one JSON event per line), selectors, Status errors,
SelfSubjectAccessReview, TokenRequest/TokenReview (service-account JWTs, see
:mod:`rotate_lab.cluster.api.tokens`), the service proxy, and pods' port-forward
(:mod:`rotate_lab.cluster.api.portforward`).

Why these choices:

- HTTPS only: kubectl never sends a bearer token over plain HTTP.
- HTTP/1.1 without ALPN ``h2``: the stdlib server does not speak HTTP/2; Go's client then
  stays on HTTP/1.1.  Every non-watch response carries Content-Length so connections are
  kept alive; watches use chunked encoding and close the connection when they end.
- The TLS handshake runs in the request thread (``do_handshake_on_connect=False``) so one slow
  client cannot stall ``accept``.
- Each request is authorised before it touches the store, with the identity of its token;
  nothing changes on any error path.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import select
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rotate_lab.cluster.api import discovery, portforward, rest, spdy_forward, tables
from rotate_lab.cluster.api.apierrors import ApiError, bad_request
from rotate_lab.cluster.api.auth import (
    Authorizer,
    Identity,
    Withheld,
    access_review,
    forbidden,
    unauthorized,
)
from rotate_lab.cluster.api.proxy import ProxyResolver, forward
from rotate_lab.cluster.api.rbac import RbacIdentity, ServiceAccountUser, name_from_field_selector
from rotate_lab.cluster.api.rest import Route
from rotate_lab.cluster.api.store import Store, Watch
from rotate_lab.cluster.api.tls import TlsMaterial
from rotate_lab.cluster.api.tokens import TokenIssuer

__all__ = ["ApiServer", "Identity"]

log = logging.getLogger("rotate_lab.apiserver")

#: (namespace, pod, container or None) → the container's log so far
LogReader = Callable[[str, str, "str | None"], bytes]
_OPEN_PATHS = ("/healthz", "/readyz", "/livez")
#: the lab's own endpoint: API requests served, by client, verb and resource
REQUEST_COUNTS_PATH = "/lab/api-requests"
MAX_BODY = 8 * 1024 * 1024
DEFAULT_WATCH_SECONDS = 1800.0
BOOKMARK_EVERY = 10.0
CLIENT_CHECK = 1.0
#: a kept-alive connection idle this long is closed (its thread ends); clients reconnect
IDLE_TIMEOUT = 120.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr: tuple[str, int], api: ApiServer, ctx: ssl.SSLContext) -> None:
        self.api = api
        self.ssl_context = ctx
        super().__init__(addr, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        return self.ssl_context.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that fails the TLS handshake (a wrong CA, a port scan) or drops the
        connection is the client's problem: logged at debug, not printed as a traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # ssl.SSLError is an OSError
            log.debug("connection from %s ended: %s", client_address, type(exc).__name__)
            return
        super().handle_error(request, client_address)


class ApiServer:
    """``ApiServer(store, tls=..., identities={token: Identity}, proxy=resolver)``.

    ``proxy(namespace, service, port)`` returns ``(pod_ip, target_port)`` of a Ready endpoint
    (``port`` is the name or number from the URL, "" when absent); it raises
    :class:`ApiError` (503) or returns None when there is none.  ``logs(namespace, pod,
    container)`` serves ``pods/log`` (``kubectl logs``) when given.  ``tokens`` signs and
    reviews service-account JWTs (a fresh in-memory key when not given).  A bearer token that
    is none of ``identities`` but a valid service-account JWT of ``tokens`` (the API server's
    audience, the ServiceAccount still there with the same uid) is that ServiceAccount,
    authorised by the RBAC objects in the store (:mod:`rotate_lab.cluster.api.rbac`).
    """

    def __init__(self, store: Store, *, host: str = "127.0.0.1", port: int = 0,
                 tls: TlsMaterial, identities: dict[str, Identity],
                 proxy: ProxyResolver | None = None, logs: LogReader | None = None,
                 tokens: TokenIssuer | None = None,
                 forwards_dropped: Callable[[], bool] = lambda: False,
                 unreachable: Callable[[str], bool] | None = None,
                 withheld: Callable[[str | None], bool] | None = None) -> None:
        """``unreachable(path)``: whether a request for ``path`` is dropped unanswered (the
        connection closed, as by a network fault) — the lab's ``journal-unreachable``;
        ``withheld(namespace)``: whether listing workloads there is forbidden to every
        caller (auth.Withheld) — the lab's ``list-forbidden``."""
        self.store = store
        #: the lab fault ``portforward-drop``: open port-forward sessions end, new ones fail
        self.forwards_dropped = forwards_dropped
        self.unreachable = unreachable or (lambda _path: False)
        self.withheld = withheld
        self.tokens = tokens or TokenIssuer()
        self.logs = logs
        self.identities = dict(identities)
        self.proxy = proxy
        self._tmp = tempfile.TemporaryDirectory(prefix="rotate-lab-tls-")
        self._server = _Server((host, port), self, tls.server_context(Path(self._tmp.name)))
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._watches: set[Watch] = set()
        self._watch_lock = threading.Lock()
        self._watches_served = 0
        #: (client, verb, resource) → requests served; the client is the User-Agent's first
        #: product token (``kubectl``, ``rotate``, ``python-httpx``...)
        self._requests: dict[tuple[str, str, str], int] = {}
        #: (user, namespace, pod, port, framing) → port-forward streams opened
        self._forwards: dict[tuple[str, str, str, int, str], int] = {}

    def count(self, agent: str | None, verb: str, resource: str) -> None:
        client = (agent or "unknown").split("/", 1)[0].split(" ", 1)[0] or "unknown"
        with self._watch_lock:
            key = (client, verb, resource)
            self._requests[key] = self._requests.get(key, 0) + 1

    def count_forward(self, user: str, target: portforward.Target, framing: str) -> None:
        with self._watch_lock:
            for port in target.ports:
                key = (user, target.namespace, target.pod, port, framing)
                self._forwards[key] = self._forwards.get(key, 0) + 1

    def request_counts(self) -> dict[str, Any]:
        """What ``GET /lab/api-requests`` answers: every resource request counted by client,
        verb (watch included) and resource, since the server started; and ``port_forwards``:
        the port-forward streams opened, by user, pod, port and framing (``websocket``,
        ``spdy``) — the record of which provider connections came through the API server."""
        with self._watch_lock:
            rows = [{"client": c, "verb": v, "resource": r, "count": n}
                    for (c, v, r), n in sorted(self._requests.items())]
            forwards = [{"user": u, "namespace": ns, "pod": pod, "port": port,
                         "framing": f, "streams": n}
                        for (u, ns, pod, port, f), n in sorted(self._forwards.items())]
            served = self._watches_served
        return {"kind": "ApiRequestCounts", "total": sum(r["count"] for r in rows),
                "watches_served": served, "requests": rows, "port_forwards": forwards}

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"https://{host!s}:{port}"

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def forward_ends(self) -> bool:
        """Whether an open port-forward session must end now: the server stops, or the lab
        fault ``portforward-drop`` is on."""
        return self._stopping.is_set() or self.forwards_dropped()

    def start(self) -> ApiServer:
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="lab-apiserver", daemon=True)
        self._thread.start()
        return self

    @property
    def open_watches(self) -> int:
        """Watch streams being served right now (tests wait on a client's watch with it)."""
        with self._watch_lock:
            return len(self._watches)

    @property
    def watches_served(self) -> int:
        """Watch streams started since start (grows only)."""
        with self._watch_lock:
            return self._watches_served

    def track(self, watch: Watch) -> None:
        with self._watch_lock:
            self._watches.add(watch)
            self._watches_served += 1

    def untrack(self, watch: Watch) -> None:
        with self._watch_lock:
            self._watches.discard(watch)

    def stop(self) -> None:
        """Stop accepting, end every open watch stream, release the port."""
        self._stopping.set()
        with self._watch_lock:
            watches = list(self._watches)
        for w in watches:
            w.close()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._tmp.cleanup()

    def identify(self, header: str | None) -> Authorizer | None:
        who = self._identify(header)
        return Withheld(who, self.withheld) if who is not None and self.withheld else who

    def _identify(self, header: str | None) -> Authorizer | None:
        # The scheme is case-insensitive (RFC 7235; kube-apiserver lower-cases it): the Python
        # client's in-cluster config sends "bearer <token>".
        scheme, _, token = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        token = token.strip()
        for known, identity in self.identities.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return identity
        return self._service_account(token)

    def _service_account(self, token: str) -> RbacIdentity | None:
        """A ServiceAccount token, reviewed as TokenReview does (audience: this server)."""
        review = self.tokens.review(self.store, {"spec": {"token": token}})
        user = (review.get("status") or {}).get("user") or {}
        parts = str(user.get("username") or "").split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            return None
        return RbacIdentity(self.store, ServiceAccountUser(parts[2], parts[3]))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: headers and body go out in separate writes; with Nagle on, each response would wait
    #: for the client's delayed ACK (~40 ms)
    disable_nagle_algorithm = True
    server: _Server

    # --- plumbing ---------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def setup(self) -> None:
        super().setup()
        try:
            self.connection.settimeout(30)
            assert isinstance(self.connection, ssl.SSLSocket)
            self.connection.do_handshake()
            self.connection.settimeout(IDLE_TIMEOUT)
        except (OSError, ssl.SSLError):
            self.close_connection = True
            raise

    def handle(self) -> None:
        with contextlib.suppress(OSError, ssl.SSLError):
            super().handle()

    def _send(self, code: int, body: bytes, content_type: str = "application/json",
              extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, doc: Any) -> None:
        self._send(code, json.dumps(doc, separators=(",", ":")).encode())

    def _error(self, err: ApiError) -> None:
        self._json(err.code, err.status())

    def _read_body(self) -> bytes:
        """Read the whole request body up front, so that no error path leaves bytes behind on
        a kept-alive connection (the next request would be parsed from the middle)."""
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            self.close_connection = True
            raise bad_request("chunked request bodies are not supported")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            raise ApiError(413, "RequestEntityTooLarge", "request entity too large")
        return self.rfile.read(length) if length > 0 else b""

    def do_GET(self) -> None:
        self._dispatch()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # --- dispatch --------------------------------------------------------------------------

    def _dispatch(self) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self._raw = b""
        try:
            self._raw = self._read_body()
            if api.unreachable(url.path):
                self.close_connection = True  # no answer: the client sees the connection drop
                return
            if url.path in _OPEN_PATHS:
                self._send(200, b"ok", "text/plain; charset=utf-8")
                return
            identity = api.identify(self.headers.get("Authorization"))
            if identity is None:
                raise unauthorized()
            if self._discovery(url.path):
                return
            if url.path == REQUEST_COUNTS_PATH and self.command == "GET":
                self._json(200, api.request_counts())
                return
            route = rest.parse_route(url.path)
            if route is None:
                raise rest.not_found_path()
            self._resource(identity, route, query, url.query)
        except ApiError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception:
            log.exception("internal error serving %s %s", self.command, url.path)
            self._error(ApiError(500, "InternalError", "an error on the server has prevented "
                                 "the request from succeeding"))

    def _discovery(self, path: str) -> bool:
        if self.command != "GET":
            return False
        p = path.rstrip("/") or "/"
        doc: dict[str, Any] | None
        if p == "/openapi/v2":
            # An empty protobuf Document: kubectl's client-side validation then finds no
            # schema for any kind and lets the object through (the server validates).
            self._send(200, b"", "application/octet-stream")
            return True
        if p == "/version":
            doc = discovery.VERSION
        elif p == "/api":
            doc = discovery.api_versions(self.server.api.address)
        elif p == "/apis":
            doc = discovery.api_group_list()
        elif p.startswith("/api/") and p.count("/") == 2:
            doc = discovery.resource_list("", p.split("/")[2])
        elif p.startswith("/apis/") and p.count("/") == 2:
            doc = discovery.api_group(p.split("/")[2])
        elif p.startswith("/apis/") and p.count("/") == 3:
            _, _, group, version = p.split("/")
            doc = discovery.resource_list(group, version)
        else:
            return False
        if doc is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self._json(200, doc)
        return True

    def _resource(self, identity: Authorizer, route: Route, query: dict[str, str],
                  raw_query: str) -> None:
        verb = rest.verb_of(self.command, route, query)
        resource = route.resource if not route.sub or route.resource.endswith(
            f"/{route.sub}") else f"{route.resource}/{route.sub}"
        self.server.api.count(self.headers.get("User-Agent"), verb, resource)
        name = route.name
        if name is None and verb in ("list", "watch"):
            name = name_from_field_selector(query.get("fieldSelector"))
        if not identity.allows(verb, route.kind.group, route.resource, route.namespace, name):
            raise forbidden(identity.name, verb, route.kind.group, route.resource,
                            route.namespace, route.name)
        if route.sub == "portforward":
            # a websocket upgrade is a GET; since Kubernetes 1.35 it also needs `create`,
            # what kubectl's SPDY POST always needed
            if verb == "get" and not identity.allows("create", route.kind.group,
                                                     route.resource, route.namespace, name):
                raise forbidden(identity.name, "create", route.kind.group, route.resource,
                                route.namespace, route.name)
            self._portforward(identity, route, raw_query)
            return
        if route.sub == "proxy":
            self._proxy(route, raw_query)
            return
        if route.sub == "log":
            self._log(route, query)
            return
        if query.get("dryRun"):
            raise bad_request("dryRun is not supported by the lab's API server")
        req = rest.Request(self.command, route, query, self._raw,
                           (self.headers.get("Content-Type") or "").split(";")[0].strip(),
                           self.headers.get("Accept") or "")
        if route.kind.virtual or route.sub == "token":
            body = rest.parse_body(self._raw, req.content_type)
            if not isinstance(body, dict):
                raise bad_request("the request body must be a JSON object")
            self._json(201, self._virtual(identity, route, body))
        elif verb == "watch":
            self._watch(route, query)
        else:
            self._json(*rest.serve(self.server.api.store, verb, req))

    def _virtual(self, identity: Authorizer, route: Route, body: dict[str, Any]) -> Any:
        """The create-only answers that store nothing."""
        tokens, store = self.server.api.tokens, self.server.api.store
        if route.sub == "token":
            assert route.namespace is not None and route.name is not None
            return tokens.token_request(store, route.namespace, route.name, body)
        if route.kind.kind == "TokenReview":
            return tokens.review(store, body)
        return access_review(identity, body)

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        api = self.server.api
        try:
            timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
        except ValueError:
            raise bad_request("timeoutSeconds must be a number") from None
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.close_connection = True
        try:
            watch = api.store.watch(route.kind.kind, route.namespace,
                                    resource_version=query.get("resourceVersion"),
                                    label_selector=query.get("labelSelector"),
                                    field_selector=query.get("fieldSelector"))
        except ApiError as err:
            self._chunk({"type": "ERROR", "object": err.status()})
            self._chunk_end()
            return
        api.track(watch)
        try:
            self._stream(route, query, watch, timeout, bookmarks)
        finally:
            api.untrack(watch)
            watch.close()

    def _stream(self, route: Route, query: dict[str, str], watch: Watch, timeout: float,
                bookmarks: bool) -> None:
        """Relay events until the timeout, the server stops, or the client goes away.

        Waits in slices of CLIENT_CHECK seconds so that a client that hung up (kubectl
        exited) frees its thread and store watch within seconds, not at its next event."""
        api = self.server.api
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + BOOKMARK_EVERY
        as_table = tables.wants_table(self.headers.get("Accept"))
        while not api.stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ev = watch.next(min(remaining, CLIENT_CHECK))
            if ev is not None:
                ev["object"] = rest.out(route, ev["object"])
                if as_table:  # `kubectl get -w`: every event carries a one-row Table
                    rv = ev["object"]["metadata"].get("resourceVersion", "")
                    ev["object"] = tables.to_table(route.kind, [ev["object"]], rv,
                                                   query.get("includeObject"))
                self._chunk(ev)
                continue
            if watch.closed or self._client_gone():
                break
            if bookmarks and time.monotonic() >= next_bookmark:
                version = api.store.bookmark_version(watch)
                if version is None:
                    continue  # an event came in: it goes first, the bookmark after
                next_bookmark = time.monotonic() + BOOKMARK_EVERY
                self._chunk({"type": "BOOKMARK", "object": {
                    "kind": route.kind.kind,
                    "apiVersion": route.kind.api_version_for(route.version),
                    "metadata": {"resourceVersion": version}}})
        self._chunk_end()

    def _client_gone(self) -> bool:
        """A watch client sends nothing after its request: readable means closed."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            self.connection.settimeout(0.05)
            try:
                data: bytes = self.connection.recv(1)
            finally:
                self.connection.settimeout(IDLE_TIMEOUT)
        except (TimeoutError, ssl.SSLWantReadError):
            return False  # a partial TLS record, not an end of stream
        except (OSError, ValueError):
            return True
        return data == b""

    def _chunk(self, doc: Any) -> None:
        data = json.dumps(doc, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _chunk_end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _proxy(self, route: Route, raw_query: str) -> None:
        assert route.name is not None and route.namespace is not None
        resolver = self.server.api.proxy
        if resolver is None:
            raise ApiError(503, "ServiceUnavailable",
                           f'no endpoints available for service "{route.name}"')
        status, content_type, payload = forward(
            resolver, route.namespace, route.name, self.command, "/" + route.rest.lstrip("/"),
            raw_query, self._raw, self.headers.get("Content-Type"))
        self._send(status, payload, content_type)

    def _portforward(self, identity: Authorizer, route: Route, raw_query: str) -> None:
        """Upgrade to a port-forward session and relay until either side ends: a websocket
        (``GET``, the Python client: :mod:`~rotate_lab.cluster.api.portforward`) or SPDY/3.1
        (``POST``, kubectl: :mod:`~rotate_lab.cluster.api.spdy_forward`).  The connection is
        not reused afterwards."""
        assert route.name is not None and route.namespace is not None
        api = self.server.api
        pod = api.store.get("Pod", route.namespace, route.name)  # 404 first
        if api.forwards_dropped():
            raise ApiError(500, "InternalError", "error dialing backend: lab fault "
                           "portforward-drop")
        ports = portforward.parse_ports(parse_qs(raw_query).get("ports", []))
        upgrade = (self.headers.get("Upgrade") or "").lower()
        if upgrade == "websocket":
            protocol = portforward.choose_protocol(self.headers.get("Sec-WebSocket-Protocol"))
            if not ports:
                raise bad_request("at least one port is required (?ports=N)")
            target = portforward.target_of(pod, ports)
            key = self.headers.get("Sec-WebSocket-Key") or ""
            if not key:
                raise bad_request("Sec-WebSocket-Key is required")
            self.close_connection = True
            self.connection.sendall(portforward.upgrade_response(key, protocol))
            api.count_forward(identity.name, target, "websocket")
            log.info("port-forward %s/%s %s for %s (websocket)", target.namespace,
                     target.pod, ",".join(map(str, ports)), identity.name)
            portforward.WebSocketForward(self.connection, target, api.forward_ends).run()
            return
        if upgrade != "spdy/3.1":
            raise bad_request("Upgrade request required")
        wanted = [p.strip() for p in (self.headers.get_all("X-Stream-Protocol-Version")
                                      or []) for p in p.split(",")]
        if spdy_forward.PROTOCOL not in wanted:
            raise bad_request(f"unable to upgrade: {spdy_forward.PROTOCOL} was not offered")
        target = portforward.target_of(pod, ports)
        self.close_connection = True
        self.connection.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
            b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: "
            + spdy_forward.PROTOCOL.encode() + b"\r\n\r\n")
        log.info("port-forward %s/%s for %s (spdy)", target.namespace, target.pod,
                 identity.name)

        def opened(port: int) -> None:
            api.count_forward(identity.name, replace(target, ports=(port,)), "spdy")

        spdy_forward.SpdyForward(self.connection, target, api.forward_ends, opened).run()

    def _log(self, route: Route, query: dict[str, str]) -> None:
        assert route.name is not None and route.namespace is not None
        self.server.api.store.get("Pod", route.namespace, route.name)  # 404 first
        reader = self.server.api.logs
        if reader is None:
            raise ApiError(404, "NotFound", "the lab keeps no logs for this pod")
        text = reader(route.namespace, route.name, query.get("container") or None)
        tail = query.get("tailLines")
        if tail and tail.isdigit():
            text = b"".join(text.splitlines(keepends=True)[-int(tail):]) if int(tail) else b""
        self._send(200, text, "text/plain")
