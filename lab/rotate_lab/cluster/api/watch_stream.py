"""One ``watch=true`` stream of the lab's API server: store events relayed as chunked JSON, one
event a line (:mod:`.handler` sends the headers and opens the store watch).

Invariants, and why:

- The stream waits in slices of :data:`CLIENT_CHECK` seconds and checks whether the client
  hung up: a ``kubectl`` that exited frees its thread and store watch within seconds, not at
  its next event.
- A bookmark (when asked for) is sent only when no event is pending, so it never claims a
  resourceVersion ahead of an event the client has not seen; at most every
  :data:`BOOKMARK_EVERY` seconds.
- The stream always ends with the terminating chunk, whether by timeout, the server
  stopping or the watch closing; the caller closes the connection after it.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import time
from collections.abc import Callable
from io import BufferedIOBase
from typing import Any

from rotate_lab.cluster.api import rest, tables
from rotate_lab.cluster.api.rest import Route
from rotate_lab.cluster.api.store import Store
from rotate_lab.cluster.api.watch import Watch

BOOKMARK_EVERY = 10.0
CLIENT_CHECK = 1.0


class WatchStream:
    """Writes one watch's events to ``wfile`` until it ends; ``stopping()`` is the server's."""

    def __init__(self, connection: socket.socket, wfile: BufferedIOBase, store: Store,
                 stopping: Callable[[], bool], accept: str | None,
                 idle_timeout: float) -> None:
        self.connection, self.wfile, self.store = connection, wfile, store
        self.stopping, self.accept, self.idle_timeout = stopping, accept, idle_timeout

    def relay(self, route: Route, query: dict[str, str], watch: Watch, timeout: float,
              bookmarks: bool) -> None:
        """Relay events until the timeout, the server stops, or the client goes away.

        Waits in slices of CLIENT_CHECK seconds so that a client that hung up (kubectl
        exited) frees its thread and store watch within seconds, not at its next event."""
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + BOOKMARK_EVERY
        as_table = tables.wants_table(self.accept)
        while not self.stopping():
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
                self.chunk(ev)
                continue
            if watch.closed or self.client_gone():
                break
            if bookmarks and time.monotonic() >= next_bookmark:
                version = self.store.bookmark_version(watch)
                if version is None:
                    continue  # an event came in: it goes first, the bookmark after
                next_bookmark = time.monotonic() + BOOKMARK_EVERY
                self.chunk({"type": "BOOKMARK", "object": {
                    "kind": route.kind.kind,
                    "apiVersion": route.kind.api_version_for(route.version),
                    "metadata": {"resourceVersion": version}}})
        self.end()

    def client_gone(self) -> bool:
        """A watch client sends nothing after its request: readable means closed."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            self.connection.settimeout(0.05)
            try:
                data: bytes = self.connection.recv(1)
            finally:
                self.connection.settimeout(self.idle_timeout)
        except (TimeoutError, ssl.SSLWantReadError):
            return False  # a partial TLS record, not an end of stream
        except (OSError, ValueError):
            return True
        return data == b""

    def chunk(self, doc: Any) -> None:
        data = json.dumps(doc, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
