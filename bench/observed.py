"""What the watch events say happened: pod lifetimes, ESO's reaction, rollouts. Pure.

Invariants:

- Times are receipt times of watch events on the harness clock (see world.Watcher).
- A pod that already existed when the watch started has ``created=None`` (it was there
  before the run); a pod still alive at the end has ``gone=None``.
- ``gone`` is the first sight of ``deletionTimestamp`` (the pod stops getting traffic then),
  else the DELETED event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


class WatchEvent(Protocol):
    @property
    def at(self) -> float: ...
    @property
    def type(self) -> str: ...
    @property
    def obj(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PodLife:
    namespace: str
    name: str
    app: str
    created: float | None
    ready: float | None
    gone: float | None
    #: first sight of every container ``started`` (startup probe passed, or running)
    started: float | None = None

    @property
    def start_to_ready(self) -> float | None:
        if self.created is None or self.ready is None:
            return None
        return self.ready - self.created


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _is_ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _is_started(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all(c.get("started") for c in statuses)


def pod_lives(events: Iterable[WatchEvent], watch_started: float) -> list[PodLife]:
    """One :class:`PodLife` per pod seen, in order of first sight."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in events:
        md = ev.obj.get("metadata") or {}
        key = (str(md.get("namespace", "")), str(md.get("name", "")))
        rec = seen.get(key)
        if rec is None:
            born = _epoch(md.get("creationTimestamp"))
            old = born is not None and born < watch_started - 1.0
            rec = seen[key] = {"app": str((md.get("labels") or {}).get("app", key[1])),
                               "created": None if old else ev.at, "ready": None, "gone": None,
                               "started": None}
            if old and _is_ready(ev.obj):
                rec["ready"] = None  # ready before the run: drawn from the left edge
                rec["was_ready"] = True
        if rec["started"] is None and rec["created"] is not None and _is_started(ev.obj):
            rec["started"] = ev.at
        if rec["ready"] is None and not rec.get("was_ready") and _is_ready(ev.obj):
            rec["ready"] = ev.at
        if rec["gone"] is None and (md.get("deletionTimestamp") or ev.type == "DELETED"):
            rec["gone"] = ev.at
    return [PodLife(ns, name, r["app"], r["created"], r["ready"], r["gone"], r["started"])
            for (ns, name), r in seen.items()]


def newest_pod(lives: Sequence[PodLife], namespace: str, app: str,
               after: float) -> PodLife | None:
    """The newest pod of ``app`` created at or after ``after``."""
    mine = [p for p in lives if p.namespace == namespace and p.app == app
            and p.created is not None and p.created >= after]
    return max(mine, key=lambda p: p.created or 0.0) if mine else None


@dataclass(frozen=True)
class EsoReaction:
    triggered: float
    synced: float

    @property
    def seconds(self) -> float:
        return self.synced - self.triggered


def eso_reaction(events: Iterable[WatchEvent], namespace: str, name: str,
                 annotation: str = "force-sync") -> EsoReaction | None:
    """The first change of the force-sync annotation (the trigger) and the first change of
    ``status.refreshTime`` after it (ESO has written the Secret)."""
    first_annotation: str | None = None
    first_refresh: str | None = None
    initial = True
    triggered: float | None = None
    for ev in events:
        md = ev.obj.get("metadata") or {}
        if md.get("namespace") != namespace or md.get("name") != name:
            continue
        ann = str((md.get("annotations") or {}).get(annotation, ""))
        refresh = str((ev.obj.get("status") or {}).get("refreshTime", ""))
        if initial:
            first_annotation, first_refresh, initial = ann, refresh, False
            continue
        if triggered is None and ann != first_annotation:
            triggered = ev.at
        if triggered is not None and refresh != first_refresh:
            return EsoReaction(triggered, ev.at)
    return None
