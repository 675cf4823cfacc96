"""``rotate watch``'s HTTP endpoints and metrics (prometheus-client, a registry of its own).

* ``/metrics``: the watcher's counters — Secret changes seen, actions taken by kind,
  credential and exit code, whether this replica leads.  Names and numbers only: never a
  value, never a Secret's content.
* ``/healthz``: 200 while the watch loop passed within ``stale`` seconds (the process is not
  wedged); 503 otherwise — a liveness probe restarts it.
* ``/readyz``: 200 once the Secret watch is established and while it runs; 503 before.

Served by the standard library's ThreadingHTTPServer on a daemon thread; bound to the
address given (loopback by default: in a pod, ``--listen 0.0.0.0:8080`` for the probes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class WatchMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._changes = Counter("rotate_watch_secret_changes", "Target Secret changes seen",
                                registry=self.registry)
        self._actions = Counter("rotate_watch_actions", "Runs the watcher started, by kind "
                                "(adopt, resume, due), credential and exit code",
                                ["action", "credential", "code"], registry=self.registry)
        self._leader = Gauge("rotate_watch_leader", "1 while this replica leads",
                             registry=self.registry)

    def changed(self) -> None:
        self._changes.inc()

    def acted(self, action: str, credential: str, code: int) -> None:
        self._actions.labels(action, credential, str(code)).inc()

    def leading(self, leading: bool) -> None:
        self._leader.set(1 if leading else 0)


class WatchHttp:
    """The endpoints on ``host:port`` (port 0: any free one, :attr:`port` says which)."""

    def __init__(self, host: str, port: int, metrics: WatchMetrics,
                 healthy: Callable[[], bool], ready: Callable[[], bool]) -> None:
        routes: dict[str, Callable[[], tuple[int, bytes, str]]] = {
            "/metrics": lambda: (200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST),
            "/healthz": lambda: _probe(healthy()),
            "/readyz": lambda: _probe(ready()),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                code, body, ctype = route() if route else (404, b"not found\n", "text/plain")
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the prober gave up first (its timeout): nothing to tell it

            def log_message(self, *_args: object) -> None:
                return  # probes every few seconds: not the watcher's log

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="watch-http",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _probe(ok: bool) -> tuple[int, bytes, str]:
    return (200, b"ok\n", "text/plain") if ok else (503, b"not ready\n", "text/plain")
