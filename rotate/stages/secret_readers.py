"""Which workloads read a Secret themselves, and how (chain.md "Workloads that read the
Secret").  Pure functions of a workload's JSON.

A pod template reads Secret NAME of its own namespace through any of

* ``env[].valueFrom.secretKeyRef`` naming NAME (the value is fixed at container start);
* ``envFrom[].secretRef`` naming NAME (every key, fixed at container start);
* a ``secret`` volume of NAME, or a ``projected`` volume with a ``secret`` source of NAME
  (files the kubelet refreshes; the program may or may not read them again),

in its containers and its init containers alike.  Two annotations on the workload say what
rotate does with it: ``rotate.dev/consumer: ignore`` (never restarted: its owner says it
does not need the value) and ``rotate.dev/reloads: file`` (it reads the mounted file again
by itself: not restarted — honoured only when every read is through a volume, since an
environment variable never changes without a restart).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CONSUMER_ANNOTATION = "rotate.dev/consumer"
RELOADS_ANNOTATION = "rotate.dev/reloads"
IGNORE = "ignore"
FILE = "file"

#: what rotate does with a reader
RESTART, IGNORED, RELOADS_FILE = "restart", "ignored", "reloads-file"


@dataclass(frozen=True)
class Reader:
    """One workload that reads the Secret: its ways of reading it and what rotate does."""

    reads: tuple[str, ...]  # "env DRAGONFLY_PASSWORD (container app)", "volume creds", …
    action: str  # RESTART | IGNORED | RELOADS_FILE
    note: str = ""  # why, when the annotation could not be honoured

    @property
    def words(self) -> str:
        how = ", ".join(self.reads)
        if self.action == IGNORED:
            return f"reads it by {how}; annotated {CONSUMER_ANNOTATION}: {IGNORE}, not restarted"
        if self.action == RELOADS_FILE:
            return (f"reads it by {how}; annotated {RELOADS_ANNOTATION}: {FILE}, reloads the "
                    "file the kubelet refreshes by itself, not restarted")
        return f"reads it by {how}; restarted" + (f" ({self.note})" if self.note else "")


def _containers(spec: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for field, label in (("initContainers", "init container"), ("containers", "container")):
        for c in spec.get(field) or []:
            yield f"{label} {c.get('name', '?')}", c


def reads(workload: Mapping[str, Any], secret: str) -> tuple[str, ...]:
    """How the pod template of ``workload`` reads Secret ``secret`` (empty: it does not)."""
    spec = (((workload.get("spec") or {}).get("template") or {}).get("spec")) or {}
    found: list[str] = []
    for where, c in _containers(spec):
        for env in c.get("env") or []:
            ref = ((env.get("valueFrom") or {}).get("secretKeyRef")) or {}
            if ref.get("name") == secret:
                found.append(f"env {env.get('name')} ({where})")
        for source in c.get("envFrom") or []:
            if ((source.get("secretRef") or {}).get("name")) == secret:
                found.append(f"envFrom ({where})")
    for vol in spec.get("volumes") or []:
        if ((vol.get("secret") or {}).get("secretName")) == secret:
            found.append(f"volume {vol.get('name')}")
        for source in ((vol.get("projected") or {}).get("sources")) or []:
            if ((source.get("secret") or {}).get("name")) == secret:
                found.append(f"projected volume {vol.get('name')}")
    return tuple(found)


def reader(workload: Mapping[str, Any], secret: str) -> Reader | None:
    """The workload as a reader of ``secret`` (None: it does not read it)."""
    how = reads(workload, secret)
    if not how:
        return None
    notes = ((workload.get("metadata") or {}).get("annotations")) or {}
    if str(notes.get(CONSUMER_ANNOTATION, "")).strip().lower() == IGNORE:
        return Reader(how, IGNORED)
    if str(notes.get(RELOADS_ANNOTATION, "")).strip().lower() == FILE:
        if all(r.startswith(("volume ", "projected volume ")) for r in how):
            return Reader(how, RELOADS_FILE)
        return Reader(how, RESTART, f"{RELOADS_ANNOTATION}: {FILE} ignored: an environment "
                      "variable changes only with a restart")
    return Reader(how, RESTART)


def maps_path(external_secret: Mapping[str, Any], path: str, key: str) -> tuple[str, str] | None:
    """(target Secret name, its key) when the ExternalSecret copies backend ``path``#``key``
    into its target (``spec.data[].remoteRef`` key + property, or ``dataFrom[].extract`` of
    the path, which keeps the key's name); None when it does not."""
    spec = external_secret.get("spec") or {}
    meta = external_secret.get("metadata") or {}
    target = str((spec.get("target") or {}).get("name") or meta.get("name") or "")
    for item in spec.get("data") or []:
        ref = item.get("remoteRef") or {}
        if str(ref.get("key") or "").strip("/") == path and ref.get("property") == key:
            return target, str(item.get("secretKey") or key)
    for item in spec.get("dataFrom") or []:
        if str(((item.get("extract") or {}).get("key")) or "").strip("/") == path:
            return target, key
    return None
