"""Which path each PostgreSQL connection took, from the lab server's own log.

The lab's PostgreSQL logs every connection (``log_connections``, 31-postgres.yaml) with its
client address and, once authenticated, its user, both under the backend's pid
(``log_line_prefix`` ``%m [%p] …``).  A connection that came through the API server's
port-forward comes from the pod's own IP (the lab relays from inside the pod, as a node
does: rotate_lab/cluster/api/portforward.py); one through the Service's ClusterIP or straight
to the pod IP comes from 127.0.0.1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_RECEIVED = re.compile(r"\[(\d+)\] .*connection received: host=([0-9.]+)")
_AUTHORIZED = re.compile(r"\[(\d+)\] .*connection authorized: user=(\S+)")


@dataclass(frozen=True)
class Connection:
    host: str
    user: str | None  # None: never authenticated (a probe's TCP connect, a refused login)


def log_path(lab_dir: Path, pod: str = "postgres-0", namespace: str = "db") -> Path:
    return lab_dir / "logs" / "pods" / f"{namespace}_{pod}.log"


def connections(text: str) -> list[Connection]:
    """Every connection in ``text`` (a slice of the log), in order of arrival."""
    hosts: dict[str, str] = {}
    order: list[str] = []
    users: dict[str, str] = {}
    for line in text.splitlines():
        if m := _RECEIVED.search(line):
            hosts[m.group(1)] = m.group(2)
            order.append(m.group(1))
        elif m := _AUTHORIZED.search(line):
            users[m.group(1)] = m.group(2)
    return [Connection(hosts[pid], users.get(pid)) for pid in order]
