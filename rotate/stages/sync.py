"""Stage ②: make ESO copy the new value into the Kubernetes Secret, and prove that it did.

Proof is three facts together, because each alone has been seen to lie:

1. ``Ready=True`` with reason ``SecretSynced`` — only says the *last* sync worked;
2. ``status.refreshTime`` not older than the trigger — ESO really ran after we asked.
   ESO writes refreshTime with second precision, so it is compared with the trigger time
   truncated to the second (otherwise a sync in the same second would look stale);
3. the target Secret's key equals the new value — compared in process, constant time.

``Ready=False`` is an error ESO reports (backend unreachable, forbidden path, ...): the wait
fails at once with ESO's own reason and message instead of running into the deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rotate.clients.seams import Kube
from rotate.core.errors import PermanentError
from rotate.core.secret import Secret
from rotate.core.timestamps import parse_rfc3339, rfc3339, truncate_to_second, utcnow
from rotate.core.waiting import CancelToken, Deadline, wait_for
from rotate.stages.kubewatch import WatchPause

FORCE_SYNC = "force-sync"


@dataclass(frozen=True)
class SyncTrigger:
    stamp: str  # the annotation value: run id + sub-second stamp
    at: datetime  # taken before the patch


@dataclass(frozen=True)
class SyncProof:
    refresh_time: str
    resource_version: str


def trigger(kube: Kube, namespace: str, name: str, run_id: str) -> SyncTrigger:
    """Annotate the ExternalSecret so ESO reconciles it now (ESO watches annotation changes).

    The trigger time is the API server's when it tells us (the newest ``managedFields`` time
    of the patched object — our own update): ESO's refreshTime is written with the cluster's
    clock, and a local clock running ahead of it would make every sync look stale.
    """
    at = utcnow()
    stamp = f"{run_id}.{at.strftime('%Y%m%dT%H%M%S.%f')}"
    obj = kube.patch(
        "ExternalSecret", namespace, name,
        {"metadata": {"annotations": {FORCE_SYNC: stamp}}}, patch_type="merge",
    )
    server = _server_time(obj)
    return SyncTrigger(stamp, server if server is not None else at)


def _server_time(obj: Mapping[str, Any]) -> datetime | None:
    times = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        try:
            times.append(parse_rfc3339(str(entry.get("time") or "")))
        except ValueError:
            continue
    return max(times) if times else None


def ready_condition(es: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (es.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond  # type: ignore[no-any-return]
    return None


def _status_facts(es: Mapping[str, Any], since: datetime) -> tuple[bool, bool, str]:
    """(ready-and-synced, fresh, description of what was seen). Raises on an ESO error."""
    cond = ready_condition(es)
    if cond is not None and cond.get("status") == "False":
        reason = str(cond.get("reason") or "error")
        message = str(cond.get("message") or "no message")
        raise PermanentError("eso", "sync", f"ExternalSecret is not Ready: {reason}: {message}")
    ready = (cond is not None and cond.get("status") == "True"
             and cond.get("reason") == "SecretSynced")
    refresh = str((es.get("status") or {}).get("refreshTime") or "")
    fresh = False
    if refresh:
        try:
            fresh = parse_rfc3339(refresh) >= truncate_to_second(since)
        except ValueError:
            fresh = False
    seen = (
        f"Ready={cond.get('status') if cond else 'absent'}"
        f" reason={cond.get('reason') if cond else '-'}"
        f" refreshTime={refresh or 'absent'} (trigger {rfc3339(since, micro=False)})"
    )
    return ready, fresh, seen


def wait(
    kube: Kube,
    external_secret: tuple[str, str],
    secret: tuple[str, str, str],
    expected: Secret,
    since: datetime,
    *,
    deadline: Deadline,
    cancel: CancelToken | None = None,
) -> SyncProof:
    """Block until all three proofs hold (see module doc); WaitTimeout names the missing one."""
    es_ns, es_name = external_secret
    s_ns, s_name, s_key = secret
    last = ["nothing observed yet"]

    def check() -> SyncProof | None:
        es = kube.get("ExternalSecret", es_ns, es_name)
        ready, fresh, seen = _status_facts(es, since)
        if not (ready and fresh):
            last[0] = seen
            return None
        current = kube.read_secret_key(s_ns, s_name, s_key)
        if current is None:
            last[0] = f"{seen}; Secret {s_ns}/{s_name} has no key {s_key!r}"
            return None
        if current != expected:
            last[0] = f"{seen}; Secret {s_ns}/{s_name}#{s_key} does not hold the new value yet"
            return None
        meta = es.get("metadata") or {}
        return SyncProof(
            refresh_time=str((es.get("status") or {}).get("refreshTime") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    with WatchPause(kube, "ExternalSecret", es_ns, es_name) as pause:
        return wait_for(
            check, deadline=deadline, what=f"ExternalSecret {es_ns}/{es_name} to sync",
            describe=lambda: last[0], cancel=cancel, pause=pause,
        )


def is_ready(es: Mapping[str, Any]) -> tuple[bool, str]:
    """Preflight: is the ExternalSecret Ready now (whatever its refresh time)?"""
    cond = ready_condition(es)
    if cond is None:
        return False, "no Ready condition"
    ok = cond.get("status") == "True"
    return ok, f"Ready={cond.get('status')} reason={cond.get('reason')}: {cond.get('message', '')}"
