"""Loopback ports for the lab's own servers (OpenBao, Prometheus, the Pushgateway).

The kernel picks a port free now; the server binds it a moment later.  Another process may
take it in between — the starters then see their part fail to come up and say so, which is
why nothing here retries.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback TCP port nothing listens on at this moment."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
