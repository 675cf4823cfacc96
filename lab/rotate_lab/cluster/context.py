"""What every part of the lab's cluster process shares.

One :class:`LabContext` is built by the cluster process (:mod:`rotate_lab.cluster.process`)
and handed to the API server, each controller and the kubelet.  It holds the object store,
the lab directory, the timing profile, the fault switches, the loopback address plan, the
in-lab DNS table and the API server as pods reach it (:class:`ApiEndpoint`).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import random
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rotate_lab.faults import Faults

if TYPE_CHECKING:
    from rotate_lab.cluster.api.store import Store
    from rotate_lab.cluster.api.tokens import TokenIssuer

CLUSTER_DOMAIN = "svc.cluster.local"


@dataclass(frozen=True)
class Profile:
    """Timing profile. ``fast`` has no artificial delays (tests); ``realistic`` is lab.md's."""

    name: str
    pod_start_delay: tuple[float, float]  # uniform range, seconds
    readiness_period: float  # seconds between readiness probes
    eso_latency: float  # seconds before ESO acts on a change
    secret_volume_delay: float  # kubelet refresh of secret volume files
    reloader_latency: float

    @classmethod
    def named(cls, name: str) -> Profile:
        if name == "fast":
            return cls("fast", (0.0, 0.0), 0.2, 0.0, 0.5, 0.0)
        if name == "realistic":
            return cls("realistic", (2.0, 5.0), 1.0, 1.0, 5.0, 1.0)
        raise ValueError(f"unknown lab profile {name!r} (fast, realistic)")

    def pod_delay(self) -> float:
        lo, hi = self.pod_start_delay
        return lo if hi <= lo else random.uniform(lo, hi)


@dataclass
class Network:
    """Loopback address plan for one lab: pods 127.N.1.x…, ClusterIPs 127.N.2.x…"""

    octet: int
    _next_pod: int = 1
    _next_cluster_ip: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _addr(self, third: int, n: int) -> str:
        # 254 addresses per /24; spill into the next /24 of the same role.
        block, host = divmod(n - 1, 254)
        return str(ipaddress.IPv4Address(f"127.{self.octet}.{third + 2 * block}.{host + 1}"))

    def pod_ip(self) -> str:
        with self._lock:
            ip = self._addr(1, self._next_pod)
            self._next_pod += 1
            return ip

    def cluster_ip(self) -> str:
        with self._lock:
            ip = self._addr(2, self._next_cluster_ip)
            self._next_cluster_ip += 1
            return ip


def choose_octet(rng: random.Random | None = None) -> int:
    """A second octet N in 100..250 whose 127.N.0.0/16 has no listening socket and binds."""
    used = _listening_second_octets()
    candidates = [n for n in range(100, 251) if n not in used]
    (rng or random.Random()).shuffle(candidates)
    for n in candidates:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((f"127.{n}.1.1", 0))
        except OSError:
            continue
        return n
    raise OSError("no free 127.N.0.0/16 for the lab (100 <= N <= 250)")


def _listening_second_octets() -> set[int]:
    """Second octets of 127.x.x.x addresses with a listening TCP socket (/proc/net/tcp)."""
    used: set[int] = set()
    try:
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return used
    for row in rows:
        cols = row.split()
        if len(cols) > 3 and cols[3] == "0A":  # TCP_LISTEN
            addr = bytes.fromhex(cols[1].split(":")[0])[::-1]  # little-endian on x86/arm
            if addr[0] == 127:
                used.add(addr[1])
    return used


class Resolver:
    """In-lab DNS: ``NAME.NS.svc.cluster.local`` (and ``NAME.NS``, ``NAME.NS.svc``) → ClusterIP.

    The service controller keeps it; every change is written to ``DIR/hosts`` (hosts-file
    format) so that pod processes, which are separate programs, resolve the same names.  A
    ``set`` that changes nothing writes nothing: the controller calls it on every reconcile,
    and a rewrite costs the controller a file write and every pod a re-read.
    """

    def __init__(self, hosts_file: Path) -> None:
        self.hosts_file = hosts_file
        self._table: dict[str, str] = {}
        self._lock = threading.Lock()

    def set(self, namespace: str, name: str, ip: str | None) -> None:
        fqdn = f"{name}.{namespace}.{CLUSTER_DOMAIN}"
        with self._lock:
            if self._table.get(fqdn) == ip and self.hosts_file.exists():
                return
            if ip is None:
                self._table.pop(fqdn, None)
            else:
                self._table[fqdn] = ip
            lines = [f"{v} {k} {k.removesuffix('.cluster.local')} "
                     f"{k.removesuffix('.svc.cluster.local')}"
                     for k, v in sorted(self._table.items())]
            tmp = self.hosts_file.with_suffix(".tmp")
            tmp.write_text("\n".join(lines) + "\n")
            os.replace(tmp, self.hosts_file)

    def resolve(self, host: str) -> str | None:
        h = host.rstrip(".")
        with self._lock:
            for suffix in ("", ".cluster.local", ".svc.cluster.local"):
                if h + suffix in self._table:
                    return self._table[h + suffix]
        return None


@dataclass(frozen=True)
class ApiEndpoint:
    """The lab API server as pods see it: host, port and the CA that signed its cert."""

    host: str
    port: int
    ca_pem: bytes

    @classmethod
    def from_url(cls, url: str, ca_pem: bytes) -> ApiEndpoint:
        hostport = url.split("://", 1)[-1].strip("/")
        host, _, port = hostport.rpartition(":")
        return cls(host, int(port), ca_pem)

    def env(self) -> dict[str, str]:
        return {"KUBERNETES_SERVICE_HOST": self.host, "KUBERNETES_SERVICE_PORT": str(self.port),
                "KUBERNETES_SERVICE_PORT_HTTPS": str(self.port)}


@dataclass
class LabContext:
    store: Store
    dir: Path
    profile: Profile
    faults: Faults
    network: Network
    resolver: Resolver
    #: a root lab's runtime directory (rotate_lab.host.runtime_dir): the kubelet puts there,
    #: instead of in ``dir``, the files of a server that runs as another user (PostgreSQL)
    runtime_dir: Path | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("rotate_lab"))
    #: filled by the cluster process: e.g. {"openbao": "http://127.0.0.1:8200"}
    endpoints: dict[str, str] = field(default_factory=dict)
    #: the API server as pods reach it, and the issuer of its ServiceAccount tokens (the
    #: kubelet mounts tokens it signs); None until the cluster process has bound its port
    api: ApiEndpoint | None = None
    tokens: TokenIssuer | None = None
