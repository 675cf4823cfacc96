"""An in-process Store + ApiServer (fresh CA, HTTPS on 127.0.0.1) for the API server tests.

``serving_apiserver`` (behind the ``apiserver`` fixture of tests/lab/conftest.py) yields an
:class:`ApiLab`: the store, the server, a kubeconfig with the admin and restricted contexts,
and a tiny HTTP backend on 127.0.0.1 that the service proxy reaches for Service ``web`` (any
other service has no endpoint: 503).  Both servers are stopped on exit.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from rotate_lab.cluster.api import kubeconfig, tls
from rotate_lab.cluster.api.apiserver import ApiServer
from rotate_lab.cluster.api.auth import Identity
from rotate_lab.cluster.api.store import Store

ADMIN_TOKEN = "admin-token-for-tests"
RESTRICTED_TOKEN = "restricted-token-for-tests"
T = TypeVar("T")


class _Backend(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        out = json.dumps({"method": self.command, "path": self.path, "body": body}).encode()
        self.send_response(200 if not self.path.startswith("/fail") else 500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class ApiLab:
    store: Store
    server: ApiServer
    kubeconfig: Path
    ca_file: Path
    backend_port: int

    def raw(self, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None,
            token: str | None = ADMIN_TOKEN) -> tuple[int, dict[str, Any]]:
        """One HTTPS request; the JSON answer (or {"text": ...})."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        host, port = self.server.address.rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        try:
            return resp.status, json.loads(data or b"null")
        except ValueError:
            return resp.status, {"text": data.decode(errors="replace")}


@contextmanager
def serving_apiserver(tmp: Path) -> Iterator[ApiLab]:
    """An ApiLab whose files are in ``tmp``; both servers stop on exit."""
    backend = ThreadingHTTPServer(("127.0.0.1", 0), _Backend)
    backend.daemon_threads = True
    backend_thread = threading.Thread(target=backend.serve_forever, daemon=True)
    backend_thread.start()
    backend_port = int(backend.server_address[1])

    def resolve(namespace: str, name: str, port: str) -> tuple[str, int] | None:
        if name == "web" and port in ("", "80", "http"):
            return "127.0.0.1", backend_port
        return None

    def pod_logs(namespace: str, pod: str, container: str | None) -> bytes:
        return f"{namespace}/{pod}/{container or '-'} line 1\nline 2\n".encode()

    store = Store()
    material = tls.generate()
    server = ApiServer(store, tls=material, identities={
        ADMIN_TOKEN: Identity.admin(), RESTRICTED_TOKEN: Identity.restricted()},
        proxy=resolve, logs=pod_logs).start()
    ca_file = material.write(tmp / "pki")[0]
    config = kubeconfig.write(tmp / "kubeconfig", server.url, material.ca_pem, ADMIN_TOKEN,
                              RESTRICTED_TOKEN)
    try:
        yield ApiLab(store, server, config, ca_file, backend_port)
    finally:
        server.stop()
        backend.shutdown()
        backend.server_close()
        backend_thread.join(5)


def deployment(name: str, namespace: str, **extra_labels: str) -> dict[str, Any]:
    labels = {"app": name, **extra_labels}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "shop:1"}]}}},
    }
