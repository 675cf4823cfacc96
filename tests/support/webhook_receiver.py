"""A webhook receiver on loopback: an ``http.server`` in a thread that answers 204 to every
POST and keeps the bodies it got, for the tests that check what a run posts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Receiver:
    url: str
    bodies: list[bytes] = field(default_factory=list)


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            received.append(self.rfile.read(length))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook", received)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
