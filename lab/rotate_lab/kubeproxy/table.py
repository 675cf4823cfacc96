"""What the proxy knows: Services and Endpoints, and which ClusterIP:port leads where.

:class:`ServiceTable` is the informer cache (filled by list + watch events); a
:class:`Source` is anything that answers the two questions the forwarder asks — which
``ClusterIP:port`` to listen on, and which Ready endpoints serve a port right now.

Invariants:

- Only TCP ports of Services with a real ClusterIP (not ``None``/headless, not empty) are
  listened on; the controller in the cluster process assigns the ClusterIP, the proxy only
  reads it.
- Endpoints are read when a connection arrives (:meth:`Source.ready`), never cached per
  listener, so a changed Endpoints object applies to the next connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from rotate_lab.cluster.api.endpoints import ready_addresses

Obj = dict[str, Any]
Key = tuple[str, str]  # namespace, name


@dataclass(frozen=True)
class PortRef:
    """One Service port: where its listener sends connections."""

    namespace: str
    name: str
    port_name: str


class Source(Protocol):
    def services(self) -> list[Obj]: ...

    def endpoints(self, namespace: str, name: str) -> Obj | None: ...


def key_of(obj: Obj) -> Key:
    md = obj.get("metadata") or {}
    return str(md.get("namespace") or ""), str(md.get("name") or "")


def listeners(services: list[Obj]) -> dict[tuple[str, int], PortRef]:
    """(ClusterIP, port) → the Service port it serves, for every TCP port with a ClusterIP."""
    want: dict[tuple[str, int], PortRef] = {}
    for svc in services:
        ns, name = key_of(svc)
        spec = svc.get("spec") or {}
        ip = spec.get("clusterIP")
        if not ip or ip == "None":
            continue
        for p in spec.get("ports") or []:
            if isinstance(p, dict) and str(p.get("protocol") or "TCP") == "TCP" and "port" in p:
                want[(str(ip), int(p["port"]))] = PortRef(ns, name, str(p.get("name") or ""))
    return want


def ready(source: Source, ref: PortRef) -> list[tuple[str, int]]:
    """The Ready endpoints of ``ref`` at this instant."""
    return ready_addresses(source.endpoints(ref.namespace, ref.name), ref.port_name)


class ServiceTable:
    """The informer cache: the last state of every Service and Endpoints object seen.

    Written only by the event loop's thread (informer events), read by the forwarder in the
    same thread: no lock.  ``replace`` is a relist (the watch broke or expired): objects
    absent from the new list are gone."""

    def __init__(self) -> None:
        self._objs: dict[str, dict[Key, Obj]] = {"Service": {}, "Endpoints": {}}

    def replace(self, kind: str, items: list[Obj]) -> None:
        self._objs[kind] = {key_of(o): o for o in items}

    def apply(self, kind: str, event_type: str, obj: Obj) -> None:
        if event_type == "DELETED":
            self._objs[kind].pop(key_of(obj), None)
        elif event_type in ("ADDED", "MODIFIED"):
            self._objs[kind][key_of(obj)] = obj

    def services(self) -> list[Obj]:
        return list(self._objs["Service"].values())

    def endpoints(self, namespace: str, name: str) -> Obj | None:
        return self._objs["Endpoints"].get((namespace, name))
