"""A TCP listener on loopback that accepts connections and never answers until released:
a webhook or Pushgateway that hangs.  ``released`` says whether the test let it go yet —
what a caller that must not wait for it is checked against."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class SilentServer:
    port: int
    released: threading.Event = field(default_factory=threading.Event)
    accepted: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def silent_server() -> Iterator[SilentServer]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = SilentServer(listener.getsockname()[1])
    held: list[socket.socket] = []

    def accept() -> None:
        while not server.released.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            server.accepted += 1
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.released.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below
        listener.close()
        for conn in held:
            conn.close()
        thread.join(timeout=5)
