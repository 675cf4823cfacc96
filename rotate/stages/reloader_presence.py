"""Does a Reloader controller actually run?  Found the way an operator would look.

A provider annotated for stakater Reloader is rolled by Reloader only when Reloader runs.
Waiting for it otherwise is a blind wait: the run would sit ``reloaderGrace``
for nothing.  A Reloader is *running* when

- a Deployment in any namespace is Reloader's — label ``app.kubernetes.io/name: reloader``
  (the Helm chart's) or a container image ``*stakater/reloader*`` — with at least one
  available replica; and
- its leader-election Lease ``stakater-reloader-lock`` (Reloader's ``LockName``, used with
  ``enableHA``) in that namespace, when it exists, is fresh: ``renewTime +
  leaseDurationSeconds`` not past.  A stale Lease means no replica leads, so nothing reloads.
  A Reloader without HA has no Lease; its available Deployment is then the whole evidence.

*Unknown* when the tool cannot look (Deployments not listable cluster-wide): the caller then
waits the grace period and says so in the plan.  Read-only: nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from rotate.clients.seams import Kube
from rotate.core.errors import ClientError, NotFoundError
from rotate.core.timestamps import parse_rfc3339, utcnow

RELOADER_LABEL = ("app.kubernetes.io/name", "reloader")
RELOADER_IMAGE = "stakater/reloader"
RELOADER_LEASE = "stakater-reloader-lock"

State = Literal["running", "absent", "unknown"]


@dataclass(frozen=True)
class Sighting:
    """What was found: ``state`` and a sentence naming the objects (for plan and journal)."""

    state: State
    detail: str


def is_reloader(deployment: Mapping[str, Any]) -> bool:
    meta = deployment.get("metadata") or {}
    labels = meta.get("labels") or {}
    if labels.get(RELOADER_LABEL[0]) == RELOADER_LABEL[1]:
        return True
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return any(RELOADER_IMAGE in str(c.get("image") or "").lower()
               for c in pod.get("containers") or [])


def lease_age(lease: Mapping[str, Any], now: datetime) -> tuple[float, float] | None:
    """(seconds since the last renewal, lease duration), or None without a renewTime."""
    spec = lease.get("spec") or {}
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    if not renewed:
        return None
    age = (now - parse_rfc3339(str(renewed))).total_seconds()
    return age, float(spec.get("leaseDurationSeconds") or 15)


def _lease(kube: Kube, namespace: str, now: datetime) -> tuple[bool, str]:
    """(fresh or absent, sentence) for Reloader's Lease in ``namespace``."""
    try:
        lease = kube.get("Lease", namespace, RELOADER_LEASE)
    except NotFoundError:
        return True, f"no Lease {namespace}/{RELOADER_LEASE} (Reloader without HA)"
    except ClientError as exc:
        return True, f"Lease {namespace}/{RELOADER_LEASE} not readable ({exc.reason})"
    aged = lease_age(lease, now)
    if aged is None:
        return False, f"Lease {namespace}/{RELOADER_LEASE} never renewed: no leader"
    age, duration = aged
    if age > duration:
        return False, (f"Lease {namespace}/{RELOADER_LEASE} not renewed for {age:.0f}s "
                       f"(duration {duration:.0f}s): no leader")
    return True, f"Lease {namespace}/{RELOADER_LEASE} renewed {max(age, 0):.0f}s ago"


def find_reloader(kube: Kube, now: datetime | None = None) -> Sighting:
    """Look for a running Reloader (see the module docstring)."""
    now = now or utcnow()
    try:
        deployments = kube.list("Deployment", None)
    except ClientError as exc:
        return Sighting("unknown", f"cannot list Deployments in all namespaces ({exc.reason})")
    found = [d for d in deployments if is_reloader(d)]
    if not found:
        return Sighting("absent", "no Deployment labelled app.kubernetes.io/name=reloader or "
                                  f"with image *{RELOADER_IMAGE}*")
    notes: list[str] = []
    for dep in found:
        meta = dep.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        available = int((dep.get("status") or {}).get("availableReplicas") or 0)
        if available < 1:
            notes.append(f"deployment {ns}/{name} has no available replica")
            continue
        fresh, lease_note = _lease(kube, ns, now)
        if fresh:
            return Sighting("running", f"deployment {ns}/{name} ({available} available), "
                                       f"{lease_note}")
        notes.append(f"deployment {ns}/{name}: {lease_note}")
    return Sighting("absent", "; ".join(notes))


def wait_phrase(who: str, sighting: Sighting, grace: str) -> str:
    """The plan's words for what provider.restart will do about ``who`` (every fixed wait
    named with its length)."""
    if sighting.state == "running":
        return (f"{who} watches the Secret and runs ({sighting.detail}): watch up to {grace} "
                "for its roll, take it only if its pods started after the Secret held the "
                "new value, else roll")
    if sighting.state == "absent":
        return (f"{who} annotation, but no Reloader runs ({sighting.detail}): no wait, "
                "set restartedAt")
    return (f"{who} watches the Secret; cannot tell whether it runs ({sighting.detail}): "
            f"fixed wait up to {grace} for its roll (a watch), then roll")
