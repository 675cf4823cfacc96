"""The Config Center reference server (config-center-api.md), stdlib HTTP over SQLite.

``python -m rotate_lab.systems.configcenter --db FILE --host 127.0.0.1 --port N
--admin-token-file F [--faults-file DIR/faults.json] [--port-file F]``

Invariants:

- The admin token is read from a file, never argv (argv is world-readable in ``ps``).
- Every write (PUT/POST/DELETE) answers 503 while the lab fault ``config-center-5xx`` is on;
  reads keep working, as in a real partial outage where the primary is down but replicas
  serve — this is the fault a rotation must survive by stopping before consumers roll.
- The access log names method, path, status and duration: never a body, a header or a token.
- ``--port 0`` binds a free port and writes it to ``--port-file`` (atomically) once the
  socket listens, so a launcher that sees the file can connect at once.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rotate_lab.systems.configcenter_state import (
    NoSchema,
    PreconditionFailed,
    SchemaRejected,
    State,
    schema_problems,
)

log = logging.getLogger("rotate_lab.configcenter")

MAX_BODY = 1 << 20
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), h)
    for m, p, h in [
        ("GET", r"/healthz", "healthz"),
        ("GET", r"/v1/services", "list_services"),
        ("GET", rf"/v1/services/(?P<svc>{_NAME})/schema", "get_schema"),
        ("PUT", rf"/v1/services/(?P<svc>{_NAME})/schema", "put_schema"),
        ("GET", rf"/v1/services/(?P<svc>{_NAME})/keys/(?P<key>{_NAME})", "get_key"),
        ("PUT", rf"/v1/services/(?P<svc>{_NAME})/keys/(?P<key>{_NAME})", "put_key"),
        ("GET", rf"/v1/services/(?P<svc>{_NAME})/keys/(?P<key>{_NAME})/versions/(?P<n>\d{{1,9}})",
         "get_version"),
        ("POST", rf"/v1/services/(?P<svc>{_NAME})/tokens", "mint_token"),
        ("GET", rf"/v1/services/(?P<svc>{_NAME})/tokens", "list_tokens"),
        ("DELETE", rf"/v1/services/(?P<svc>{_NAME})/tokens/(?P<id>{_NAME})", "revoke_token"),
        ("GET", r"/v1/bootstrap", "bootstrap"),
    ]
]
_WRITES = frozenset({"PUT", "POST", "DELETE", "PATCH"})


class HttpError(Exception):
    def __init__(self, status: int, error: str, details: list[dict[str, str]] | None = None):
        super().__init__(error)
        self.status, self.error, self.details = status, error, details


class ConfigCenterServer(ThreadingHTTPServer):
    daemon_threads = True
    #: a real server's listen backlog (Go's net/http: somaxconn), not socketserver's 5: with
    #: 5, a burst of parallel connections (rotate's config.write/token.mint groups) overflows
    #: it and the dropped SYN is retried by the client's kernel a whole second later
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], state: State, admin_token: str,
                 faults_file: Path | None) -> None:
        super().__init__(addr, Handler)
        self.state = state
        self.admin_token = admin_token
        from rotate_lab.faults import Faults

        self.faults = Faults(faults_file) if faults_file is not None else None

    def writes_down(self) -> bool:
        return self.faults is not None and self.faults.active("config-center-5xx")


class Handler(BaseHTTPRequestHandler):
    server: ConfigCenterServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY the second waits for
    # the client's delayed ACK (~40 ms a request).
    disable_nagle_algorithm = True
    server_version = "rotate-lab-configcenter/1"

    # -- plumbing -------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the stdlib log: it would print the raw request line with query strings."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        started = time.monotonic()
        path = self.path.split("?", 1)[0]
        status = 500
        try:
            body = self._read_body()
            handler, params = self._route(method, path)
            if method in _WRITES and self.server.writes_down():
                raise HttpError(503, "unavailable")
            status = getattr(self, "h_" + handler)(body=body, **params)
        except HttpError as exc:
            status = exc.status
            payload: dict[str, Any] = {"error": exc.error}
            if exc.details is not None:
                payload["details"] = exc.details
            self._send(status, payload)
        except Exception:  # a bug must not kill the server or print a document
            log.exception("internal error on %s %s", method, path)
            status = 500
            self._send(500, {"error": "internal"})
        log.info("%s %s %d %.1fms", method, path, status, (time.monotonic() - started) * 1000)

    def _route(self, method: str, path: str) -> tuple[str, dict[str, str]]:
        allowed = False
        for m, pattern, handler in _ROUTES:
            match = pattern.fullmatch(path)
            if match:
                if m == method:
                    return handler, match.groupdict()
                allowed = True
        raise HttpError(405 if allowed else 404, "method not allowed" if allowed else "not found")

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            raise HttpError(413, "body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _send(
        self, status: int, payload: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status, HTTPStatus(status).phrase)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def _bearer(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    def _admin(self) -> None:
        token = self._bearer()
        expected = self.server.admin_token.encode()
        if token is None or not hmac.compare_digest(token.encode(), expected):
            raise HttpError(401, "unauthorized")

    @staticmethod
    def _json(body: bytes) -> Any:
        try:
            return json.loads(body)
        except ValueError:
            raise HttpError(400, "body is not JSON") from None

    # -- handlers (return the status they sent) -------------------------------------------

    def h_healthz(self, body: bytes) -> int:
        self._send(200, {"status": "ok"})
        return 200

    def h_list_services(self, body: bytes) -> int:
        self._admin()
        self._send(200, {"services": self.server.state.services()})
        return 200

    def h_get_schema(self, body: bytes, svc: str) -> int:
        self._admin()
        schema = self.server.state.get_schema(svc)
        if schema is None:
            raise HttpError(404, "not found")
        self._send(200, schema)
        return 200

    def h_put_schema(self, body: bytes, svc: str) -> int:
        self._admin()
        schema = self._json(body)
        problems = schema_problems(schema)
        if problems:
            raise HttpError(422, "invalid schema",
                            [{"path": p.path, "message": p.message} for p in problems])
        self.server.state.put_schema(svc, schema)
        self._send(200, {"service": svc})
        return 200

    def _value_response(self, found: tuple[Any, int] | None) -> int:
        if found is None:
            raise HttpError(404, "not found")
        value, version = found
        self._send(200, {"value": value, "version": version}, {"ETag": f'"{version}"'})
        return 200

    def h_get_key(self, body: bytes, svc: str, key: str) -> int:
        self._admin()
        return self._value_response(self.server.state.get_key(svc, key))

    def h_get_version(self, body: bytes, svc: str, key: str, n: str) -> int:
        self._admin()
        return self._value_response(self.server.state.get_key(svc, key, int(n)))

    def h_put_key(self, body: bytes, svc: str, key: str) -> int:
        self._admin()
        doc = self._json(body)
        if not isinstance(doc, dict) or "value" not in doc:
            raise HttpError(400, 'body must be {"value": ...}')
        if_match = _parse_if_match(self.headers.get("If-Match"))
        if_none_match = (self.headers.get("If-None-Match") or "").strip() == "*"
        # Preconditions first (RFC 9110 §13.2.2): a write If-Match a version that is not the
        # current one answers 412 before the body is validated — so `If-Match: "0"` proves
        # write access without changing anything (rotate's preflight `configcenter.writable`)
        if if_match is not None and if_match != self.server.state.current_version(svc, key):
            raise HttpError(412, "precondition failed")
        try:
            version = self.server.state.put_key(
                svc, key, doc["value"], if_match=if_match, if_none_match=if_none_match
            )
        except NoSchema:
            raise HttpError(422, "schema", [{"path": "", "message": "service has no schema"}]) \
                from None
        except SchemaRejected as exc:
            raise HttpError(422, "schema", [{"path": p.path, "message": p.message}
                                            for p in exc.problems]) from None
        except PreconditionFailed:
            raise HttpError(412, "precondition failed") from None
        self._send(200, {"version": version}, {"ETag": f'"{version}"'})
        return 200

    def h_mint_token(self, body: bytes, svc: str) -> int:
        self._admin()
        label = None
        if body.strip():
            doc = self._json(body)
            label = doc.get("label") if isinstance(doc, dict) else None
            if label is not None and (not isinstance(label, str) or len(label) > 128):
                raise HttpError(400, "label must be a string of at most 128 characters")
        minted = self.server.state.mint_token(svc, label)
        self._send(201, {"id": minted.id, "token": minted.token, "expires_at": minted.expires_at})
        return 201

    def h_list_tokens(self, body: bytes, svc: str) -> int:
        self._admin()
        self._send(200, self.server.state.list_tokens(svc))
        return 200

    def h_revoke_token(self, body: bytes, svc: str, id: str) -> int:
        self._admin()
        if not self.server.state.revoke_token(svc, id):
            raise HttpError(404, "not found")
        self._send(204)
        return 204

    def h_bootstrap(self, body: bytes) -> int:
        token = self._bearer()
        service = None if token is None else self.server.state.service_for_token(token)
        if service is None:
            raise HttpError(401, "unauthorized")
        found = self.server.state.get_key(service, "bootstrap")
        if found is None:
            raise HttpError(404, "not found")
        value, version = found
        self._send(200, value, {"ETag": f'"{version}"', "X-Config-Service": service})
        return 200


def _parse_if_match(raw: str | None) -> int | None:
    """``"7"`` (or ``W/"7"``, or bare 7) → 7; anything unparseable can never match."""
    if raw is None or not raw.strip():
        return None
    text = raw.strip().removeprefix("W/").strip('"')
    try:
        return int(text)
    except ValueError:
        return -1


def _write_port_file(path: Path, port: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{port}\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rotate_lab.systems.configcenter")
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--admin-token-file", required=True, type=Path)
    ap.add_argument("--faults-file", type=Path)
    ap.add_argument("--port-file", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if not args.host.startswith("127."):
        ap.error("the lab binds to loopback only (127.0.0.0/8)")
    admin_token = args.admin_token_file.read_text().strip()
    if not admin_token:
        ap.error("the admin token file is empty")
    state = State(args.db)
    server = ConfigCenterServer((args.host, args.port), state, admin_token, args.faults_file)
    port = server.server_address[1]
    if args.port_file is not None:
        _write_port_file(args.port_file, int(port))
    log.info("config center listening on http://%s:%d", args.host, port)

    def _stop(signum: int, frame: Any) -> None:
        # shutdown() blocks until serve_forever returns, so it cannot run on this thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        state.close()
        log.info("config center stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
