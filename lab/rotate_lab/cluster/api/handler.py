"""One HTTPS connection of the lab's API server: the TLS server and the request handler
that reads each request, authorises it and answers it (:mod:`.apiserver` owns the server's
lifecycle, identities and counters; :mod:`.rest` the resource semantics).

Invariants, and why:

- The TLS handshake runs in the request thread (``do_handshake_on_connect=False``) so one slow
  client cannot stall ``accept``; a failed handshake is logged at debug, never a traceback.
- The whole body is read before anything else, so no error path leaves bytes behind on a
  kept-alive connection; every non-watch response carries Content-Length.
- Each request is authorised with the identity of its token before it touches the store;
  nothing changes on any error path.
- A watch (:mod:`.watch_stream`) is chunked JSON, one event a line, with bookmarks; it ends
  when the server stops, the client hangs up or its timeout passes, and the connection
  closes with it.
- The handler reaches the server only through :class:`Backend`, so this module never
  imports :mod:`.apiserver` (no cycle between the two).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import sys
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from rotate_lab.cluster.api import discovery, portforward, rest, spdy_forward
from rotate_lab.cluster.api.apierrors import ApiError, bad_request
from rotate_lab.cluster.api.auth import (
    Authorizer,
    access_review,
    forbidden,
    unauthorized,
)
from rotate_lab.cluster.api.proxy import ProxyResolver, forward
from rotate_lab.cluster.api.rbac import name_from_field_selector
from rotate_lab.cluster.api.rest import Route
from rotate_lab.cluster.api.store import Store
from rotate_lab.cluster.api.tokens import TokenIssuer
from rotate_lab.cluster.api.watch import Watch
from rotate_lab.cluster.api.watch_stream import WatchStream

log = logging.getLogger("rotate_lab.apiserver")

#: (namespace, pod, container or None) → the container's log so far
LogReader = Callable[[str, str, "str | None"], bytes]
_OPEN_PATHS = ("/healthz", "/readyz", "/livez")
#: the lab's own endpoint: API requests served, by client, verb and resource
REQUEST_COUNTS_PATH = "/lab/api-requests"
MAX_BODY = 8 * 1024 * 1024
DEFAULT_WATCH_SECONDS = 1800.0
#: a kept-alive connection idle this long is closed (its thread ends); clients reconnect
IDLE_TIMEOUT = 120.0



class Backend(Protocol):
    """What a request needs of the API server (:class:`~.apiserver.ApiServer`)."""

    @property
    def store(self) -> Store: ...
    @property
    def tokens(self) -> TokenIssuer: ...
    @property
    def proxy(self) -> ProxyResolver | None: ...
    @property
    def logs(self) -> LogReader | None: ...
    @property
    def unreachable(self) -> Callable[[str], bool]: ...
    @property
    def forwards_dropped(self) -> Callable[[], bool]: ...
    @property
    def address(self) -> str: ...
    @property
    def stopping(self) -> bool: ...
    def forward_ends(self) -> bool: ...
    def identify(self, header: str | None) -> Authorizer | None: ...
    def request_counts(self) -> dict[str, Any]: ...
    def count(self, agent: str | None, verb: str, resource: str) -> None: ...
    def count_forward(self, user: str, target: portforward.Target, framing: str) -> None: ...
    def track(self, watch: Watch) -> None: ...
    def untrack(self, watch: Watch) -> None: ...


class TlsServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr: tuple[str, int], api: Backend, ctx: ssl.SSLContext) -> None:
        self.api = api
        self.ssl_context = ctx
        super().__init__(addr, RequestHandler)

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

class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: headers and body go out in separate writes; with Nagle on, each response would wait
    #: for the client's delayed ACK (~40 ms)
    disable_nagle_algorithm = True
    server: TlsServer

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
        stream = WatchStream(self.connection, self.wfile, api.store, lambda: api.stopping,
                             self.headers.get("Accept"), IDLE_TIMEOUT)
        try:
            watch = api.store.watch(route.kind.kind, route.namespace,
                                    resource_version=query.get("resourceVersion"),
                                    label_selector=query.get("labelSelector"),
                                    field_selector=query.get("fieldSelector"))
        except ApiError as err:
            stream.chunk({"type": "ERROR", "object": err.status()})
            stream.end()
            return
        api.track(watch)
        try:
            stream.relay(route, query, watch, timeout, bookmarks)
        finally:
            api.untrack(watch)
            watch.close()

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
