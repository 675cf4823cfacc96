"""ReplicaSet controller, and the pod predicates every workload controller shares.

A ReplicaSet keeps ``spec.replicas`` active pods of its template: it creates pods (named
``<rs>-<5 chars>`` through ``generateName``, with a controller ``ownerReference``) and
deletes surplus ones, least valuable first, as Kubernetes ranks them (not yet running, then
not ready, then the youngest).  Its status counts the pods it owns: ``replicas``,
``fullyLabeledReplicas``, ``readyReplicas``, ``availableReplicas`` (Ready for at least
``minReadySeconds``) and ``observedGeneration``.

A surplus pod is deleted gracefully, as in Kubernetes: it gets ``deletionTimestamp`` (and
``deletionGracePeriodSeconds``) and shows ``Terminating`` while the kubelet stops its
processes (SIGTERM, the app's drain, SIGKILL after the grace), then the kubelet removes the
object.  A terminating pod is no replica (it counts nowhere in the status) and no endpoint
(the endpoints controller drops it at once).  Owned pods of a deleted ReplicaSet go with it
at once: the store cascades deletion through ``ownerReferences``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.controllers.base import (
    Key,
    OwnerController,
)

Obj = dict[str, Any]

#: the most pods one reconcile creates; the rest follow on the next pass (client-go's
#: slow-start batching serves the same purpose: never flood the API with a bad template).
CREATE_BURST = 50


def parse_time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def pod_condition(pod: Obj, ctype: str) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def pod_is_active(pod: Obj) -> bool:
    """Counts toward a workload's replicas: not being deleted and not finished."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def pod_is_ready(pod: Obj) -> bool:
    cond = pod_condition(pod, "Ready")
    return pod_is_active(pod) and cond is not None and cond.get("status") == "True"


def available_in(pod: Obj, min_ready_seconds: int, now: float) -> float | None:
    """Seconds until the pod counts as available: 0 when it is, None when it is not Ready."""
    if not pod_is_ready(pod):
        return None
    if min_ready_seconds <= 0:
        return 0.0
    since = parse_time((pod_condition(pod, "Ready") or {}).get("lastTransitionTime"))
    if since is None:
        return 0.0
    return max(0.0, since + min_ready_seconds - now)


def count_available(pods: Iterable[Obj], min_ready_seconds: int) -> tuple[int, int, float | None]:
    """(ready, available, seconds until the next pod becomes available or None): the counts
    every workload status reports, and when to look again."""
    now = datetime.now(UTC).timestamp()
    ready = available = 0
    wake: float | None = None
    for pod in pods:
        left = available_in(pod, min_ready_seconds, now)
        if left is None:
            continue
        ready += 1
        if left <= 0:
            available += 1
        else:
            wake = left if wake is None else min(wake, left)
    return ready, available, wake


def owner_reference(owner: Obj) -> Obj:
    md = owner["metadata"]
    return {"apiVersion": owner.get("apiVersion", "apps/v1"), "kind": owner["kind"],
            "name": md["name"], "uid": md["uid"], "controller": True,
            "blockOwnerDeletion": True}


def pod_from_template(owner: Obj, template: Obj, *, name: str | None = None,
                      extra_labels: dict[str, str] | None = None) -> Obj:
    """A Pod for ``owner`` from a pod template (``generateName`` unless ``name`` is given)."""
    tmeta = template.get("metadata") or {}
    meta: Obj = {
        "namespace": owner["metadata"]["namespace"],
        "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = f"{owner['metadata']['name']}-"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": copy.deepcopy(template.get("spec") or {})}


def grace_period(pod: Obj) -> int:
    """The pod's ``terminationGracePeriodSeconds`` (Kubernetes' default 30), at least 1."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return max(1, int(value)) if isinstance(value, int) else 30


def _deletion_rank(pod: Obj) -> tuple[int, int, str]:
    """Lower sorts first = deleted first: unscheduled/pending, not ready, then youngest."""
    phase = (pod.get("status") or {}).get("phase")
    running = 1 if phase == "Running" else 0
    ready = 1 if pod_is_ready(pod) else 0
    created = str((pod.get("metadata") or {}).get("creationTimestamp") or "")
    # Younger pods first among equals: invert the timestamp's order.
    inverted = "".join(chr(0x10FFFF - ord(c)) for c in created)
    return (running, ready, inverted)


class ReplicaSetController(OwnerController):
    name = "replicaset"
    kinds = ("ReplicaSet", "Pod")

    def owned_pods(self, rs: Obj) -> list[Obj]:
        return self.owned("Pod", rs)

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        store = self.ctx.store
        try:
            rs = store.get("ReplicaSet", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        spec = rs.get("spec") or {}
        want = int(spec.get("replicas", 1))
        active = [p for p in self.owned_pods(rs) if pod_is_active(p)]
        diff = len(active) - want
        if diff < 0:
            template = spec.get("template") or {}
            for _ in range(min(-diff, CREATE_BURST)):
                store.create("Pod", pod_from_template(rs, template))
        elif diff > 0:
            for pod in sorted(active, key=_deletion_rank)[:diff]:
                try:
                    store.delete("Pod", ns, pod["metadata"]["name"],
                                 grace_seconds=grace_period(pod))
                except ApiError as exc:
                    if exc.code != 404:
                        raise
        if diff:
            active = [p for p in self.owned_pods(rs) if pod_is_active(p)]
        return self._sync_status(rs, active)

    def _sync_status(self, rs: Obj, active: list[Obj]) -> float | None:
        spec = rs.get("spec") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        selector_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        ready, available, wake = count_available(active, min_ready)
        fully = sum(1 for p in active
                    if all((p["metadata"].get("labels") or {}).get(k) == v
                           for k, v in selector_labels.items()))
        status: Obj = {
            "replicas": len(active),
            "fullyLabeledReplicas": fully,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        old = rs.get("status") or {}
        if any(old.get(k) != v for k, v in status.items()):
            def put(obj: Obj) -> None:
                obj["status"] = {**(obj.get("status") or {}), **status}

            self.ctx.store.mutate("ReplicaSet", rs["metadata"]["namespace"],
                                  rs["metadata"]["name"], put, subresource="status")
        return None if wake is None else wake + 0.05
