"""A prepared consumer rollout is *staged* once its new pods have started (chain.md "Order").

Under the restart strategy the consumers' rollouts are started before the provider switches
(rotate.engine.plan).  Patching the pod template only asks for new pods; if the provider
switched right away, the consumers would still pay a whole pod start (scheduling, process
start, reading the new document) after the switch.  So the switch waits until the new pods
*exist and have started* — each container ``started: true``, i.e. its startupProbe passed
(without one: the container runs) — and are only held back from Ready by the provider still
refusing their value, while the old pods serve.  After the switch they become Ready within a
readiness period.

How many new pods to wait for: a Deployment's RollingUpdate creates, before any new pod is
Ready, ``maxSurge`` pods above ``replicas`` plus as many as ``maxUnavailable`` lets it take
from the old ones — ``min(replicas, maxSurge + maxUnavailable)`` (surge.fenceposts).  Waiting
for more would wait forever: the rest are only created once these are Ready, which needs the
switch.  Our new pods are the ones whose template stamp (``restartedAt``) is the one this
run's restart wrote — or a later one: a restart made after ours (another credential's run
sharing the consumer, a human) replaces our pods with its own, which read the document and
token we wrote as well (they start later), so they stage our rollout too; waiting for ours
would wait for pods that are gone.  A pod being deleted, or one that already ended, does not
count.

Other kinds are never prepared (surge.verdict), so they are staged at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rotate.clients.seams import Kube
from rotate.core.observation import Observation
from rotate.core.refs import ObjectRef
from rotate.core.timestamps import parse_rfc3339
from rotate.core.waiting import CancelToken, Deadline, wait_for
from rotate.stages.kubecache import ObjectCache
from rotate.stages.rollout import RESTARTED_AT, match_labels, metadata
from rotate.stages.surge import fenceposts


@dataclass(frozen=True)
class Staged:
    """``done``: enough new pods have started; ``note``: what was seen (for the report, or
    the timeout's "last seen")."""

    done: bool
    note: str
    #: (new pods started, new pods wanted), for the step's progress
    count: tuple[int, int] | None = None


def expected_new_pods(obj: Mapping[str, Any]) -> int:
    """New pods the controller creates before any of them is Ready (see module doc)."""
    if str(obj.get("kind") or "") != "Deployment":
        return 0
    replicas, surge, unavailable = fenceposts(obj)
    return min(replicas, surge + unavailable)


def pod_started(pod: Mapping[str, Any]) -> bool:
    """Every container of the pod reports ``started`` (or Ready: a started container)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    containers = (pod.get("spec") or {}).get("containers") or []
    if not statuses or len(statuses) < len(containers):
        return False
    return all(bool(cs.get("started")) or bool(cs.get("ready")) for cs in statuses)


def _after(seen: object, stamp: str) -> bool:
    try:
        return parse_rfc3339(str(seen)) > parse_rfc3339(stamp)
    except ValueError:
        return False


def _template_labels(obj: Mapping[str, Any]) -> dict[str, Any]:
    template = (obj.get("spec") or {}).get("template") or {}
    return dict((template.get("metadata") or {}).get("labels") or {})


def _ours(pod: Mapping[str, Any], stamp: str, labels: Mapping[str, Any]) -> bool:
    """Stamped by our restart — or by a later one of the same workload (its template's
    labels on the pod: a workload without labels counts its own stamp only, since the
    stamp is then all that tells its pods from the namespace's others)."""
    meta = metadata(pod)
    if meta.get("deletionTimestamp"):
        return False
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    seen = (meta.get("annotations") or {}).get(RESTARTED_AT)
    if seen == stamp:
        return True
    own = meta.get("labels") or {}
    return (seen is not None and bool(labels) and all(own.get(k) == v for k, v in labels.items())
            and _after(seen, stamp))


def _waiting_reasons(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    reasons: list[str] = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
            if reason:
                reasons.append(f"{metadata(pod).get('name')}: {reason}")
    return reasons


def staged(obj: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], stamp: str) -> Staged:
    """Whether the workload's rollout stamped ``stamp`` has started its new pods.  Pure."""
    want = expected_new_pods(obj)
    if want == 0:
        return Staged(True, "no new pod to wait for")
    labels = _template_labels(obj)
    ours = [p for p in pods if _ours(p, stamp, labels)]
    started = [p for p in ours if pod_started(p)]
    if len(started) >= want:
        return Staged(True, f"{len(started)} new pod(s) started", (len(started), want))
    note = f"{len(started)} of {want} new pod(s) started ({len(ours)} created)"
    reasons = _waiting_reasons(ours)
    return Staged(False, note + (f"; waiting: {', '.join(reasons)}" if reasons else ""),
                  (len(started), want))


def no_startup_probe(obj: Mapping[str, Any]) -> bool:
    """A container of the pod template has no startupProbe: "started" then only means the
    process runs, not that it listens (the plan says so)."""
    spec = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {})
    return any("startupProbe" not in c for c in spec.get("containers") or [])


def wait_staged(
    kube: Kube, ref: ObjectRef, stamp: str, *, deadline: Deadline,
    cancel: CancelToken | None = None, pods: ObjectCache | None = None,
) -> str:
    """Wait until :func:`staged` holds for ``ref``'s rollout stamped ``stamp``.  Raises
    WaitTimeout at ``deadline`` (a new pod that never starts: bad image, crash loop) — before
    the provider switched.

    The pods are read from ``pods``, the run's watched copy of the namespace's Pods shared by
    every waiter (rotate.stages.kubecache), and the wait wakes when that copy changes; without
    one, a private copy lives for this wait.  The workload is read once: its selector,
    replicas and strategy do not change under a rollout."""
    if pods is None:
        private = ObjectCache(kube, "Pod", ref.namespace)
        try:
            return wait_staged(kube, ref, stamp, deadline=deadline, cancel=cancel, pods=private)
        finally:
            private.close()
    last = [Observation("nothing observed yet")]
    workload: list[Mapping[str, Any]] = []
    reader = pods.reader()

    def check() -> str | None:
        if not workload:
            workload.append(kube.get(ref.kind, ref.namespace, ref.name))
        # no matchLabels: every pod of the namespace; the stamp still picks ours
        ours = reader.objects(match_labels(workload[0]))
        verdict = staged(workload[0], ours, stamp)
        last[0] = Observation(verdict.note, *verdict.count, "new pods started") \
            if verdict.count else Observation(verdict.note)
        return verdict.note if verdict.done else None

    return wait_for(check, deadline=deadline, what=f"new pods of {ref} to start",
                    describe=lambda: last[0], cancel=cancel, pause=reader)
