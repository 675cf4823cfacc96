"""The values of ``rotate status`` (rotate.engine.status): its links, what one credential's
checks found, and the pod facts they share.  Never a value: fingerprints, versions, times and
names only."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rotate.core.durations import format_duration
from rotate.core.errors import ForbiddenError
from rotate.core.secret import Secret
from rotate.core.timestamps import parse_rfc3339, rfc3339

#: the link names, in the order they are checked and named (docs/cli.md)
LINKS = ("backend", "secret", "externalsecret", "provider", "provider.retired",
         "consumer.document", "consumer.pods", "consumer.readyz", "consumer.token",
         "reader.pods", "value.age")


@dataclass(frozen=True)
class Link:
    """One proven (or broken) link.  ``detail`` names versions, times, fingerprints and
    objects — never a value."""

    link: str  # one of LINKS
    target: str  # the object: a path, NS/NAME#key, a workload, a service
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"link": self.link, "target": self.target, "ok": self.ok, "detail": self.detail}



@dataclass
class Found:
    backend: str
    version: int | None = None
    fingerprint: str = ""
    written_at: datetime | None = None
    age_seconds: float | None = None
    max_age_seconds: float | None = None
    links: list[Link] = field(default_factory=list)


@dataclass(frozen=True)
class Current:
    """What the backend holds now, and the value it replaced (None: none found)."""

    version: int
    written_at: datetime
    value: Secret
    retired: Secret | None
    retired_version: int | None
    overlap_open: bool  # overlap.previousKey still holds another value than the key
    #: since when the backend holds this value: the oldest version of the latest run of
    #: versions holding it, not counting a version with another value that the
    #: ExternalSecret never synced (a hand write put back before ESO saw it)
    value_since: datetime
    #: (from, until): the backend held this same value before too, from ``from`` until
    #: ``until``, when versions with another value began (a run rolled back: a canary's):
    #: a consumer whose pods started then and were never moved holds this value
    held_before: tuple[datetime, datetime] | None = None


class Listed:
    """The objects of one kind in one namespace, listed once for every check that needs one
    of them: the pods of a consumer namespace, its Deployments.  One list per (kind,
    namespace) even when the pool's threads ask at once (a lock per key), so 100 consumers
    cost one request where 100 GETs were."""

    def __init__(self, kube: Any) -> None:
        self._kube = kube
        self._lock = threading.Lock()
        self._keys: dict[tuple[str, str], threading.Lock] = {}
        self._lists: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._refused: dict[tuple[str, str], ForbiddenError] = {}

    def objects(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        key = (kind, namespace)
        with self._lock:
            one = self._keys.setdefault(key, threading.Lock())
        with one:
            if key in self._refused:  # refused once: refused for the whole command
                raise self._refused[key]
            if key not in self._lists:
                try:
                    self._lists[key] = self._kube.list(kind, namespace)
                except ForbiddenError as exc:
                    self._refused[key] = exc
                    raise
            return self._lists[key]

    def workload(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """The workload as listed; a GET when the list does not hold it or may not be made
        (``rotate rbac`` grants get by name on the workloads rolled, list only in the
        namespaces of ``consumers.namespaces``)."""
        from rotate.stages.rollout import metadata

        try:
            listed = self.objects(kind, namespace)
        except ForbiddenError:
            listed = []
        for obj in listed:
            if metadata(obj).get("name") == name:
                return obj
        return dict(self._kube.get(kind, namespace, name))

    def pods_of(self, workload: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The live pods the workload's ``matchLabels`` select."""
        from rotate.stages.rollout import match_labels, metadata

        wanted = match_labels(workload)
        if not wanted:
            return []
        listed = self.objects("Pod", str(metadata(workload).get("namespace") or ""))
        return [p for p in listed
                if not metadata(p).get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and all((metadata(p).get("labels") or {}).get(k) == v
                        for k, v in wanted.items())]


def pods_since(pods: list[dict[str, Any]], since: datetime, what: str,
               before: tuple[datetime, datetime] | None = None) -> tuple[bool, str]:
    """Whether every pod started at or after ``since`` (second precision, as Kubernetes
    keeps it) — or within ``before`` (from, until: the same value held earlier) — and the
    words saying so."""
    from rotate.stages.rollout import metadata

    if not pods:
        return True, "no running pods"
    floor = since.replace(microsecond=0)
    for pod in pods:
        started = (pod.get("status") or {}).get("startTime") or metadata(pod).get(
            "creationTimestamp")
        try:
            at = parse_rfc3339(str(started)) if started else None
        except ValueError:
            at = None
        late = at is not None and (at >= floor or (
            before is not None
            and before[0].replace(microsecond=0) <= at < before[1].replace(microsecond=0)))
        if not late:
            return False, (f"pod {metadata(pod).get('name')} started "
                           f"{started or 'at an unknown time'}, before {what} "
                           f"({rfc3339(since, micro=False)})")
    return True, (f"{len(pods)} pod(s) started after {what} ({rfc3339(since, micro=False)})")


def age_words(seconds: float) -> str:
    if seconds < 3600:
        return format_duration(seconds)
    days, rest = divmod(int(seconds), 86400)
    return f"{days}d{rest // 3600}h" if days else f"{rest // 3600}h{rest % 3600 // 60:02d}m"
