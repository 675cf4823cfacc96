"""A real Prometheus Pushgateway for the lab (``rotate lab up --with pushgateway``): Debian's
``/usr/bin/prometheus-pushgateway``, on a loopback port, where a run configured with
``notify.pushgateway: {urlEnv: PUSHGATEWAY_URL}`` pushes its metrics (docs/notifications.md).

Recorded in ``DIR/pids.json`` as the part ``pushgateway``, stopped by ``lab down`` by that
pid; its URL is ``PUSHGATEWAY_URL`` in ``DIR/env``.  No persistence file: a lab is
short-lived, its metrics go with it.  With ``--with prometheus`` too, the lab's Prometheus
scrapes it (``honor_labels``, as docs/notifications.md recommends).
"""

from __future__ import annotations

import shutil
from pathlib import Path

#: Debian's binary; PATH's ``prometheus-pushgateway`` otherwise
BINARY = "/usr/bin/prometheus-pushgateway"


class NoPushgateway(Exception):
    """The Pushgateway is not installed here."""


def binary() -> str:
    found = BINARY if Path(BINARY).exists() else shutil.which("prometheus-pushgateway")
    if not found:
        raise NoPushgateway("prometheus-pushgateway is not installed (Debian: apt-get install "
                            "prometheus-pushgateway; `make install` does it)")
    return found


def argv(port: int) -> list[str]:
    """Started in the lab's directory: its working directory is what ``down`` recognises it
    by (rotate_lab.host.processes.ours)."""
    return [binary(), f"--web.listen-address=127.0.0.1:{port}", "--persistence.file=",
            "--log.level=warn"]
