"""Stage ③ and the consumer rollouts: restart a workload and wait for ``rollout status``.

Restart leaves the same trace as ``kubectl rollout restart`` — the pod-template annotation
``kubectl.kubernetes.io/restartedAt`` — but with microseconds, so two restarts within one
second still change the template.  The workload's own metadata gets ``rotate.dev/run-id``:
a resumed run that finds its run id there does not restart again, it only waits.

Completion follows kubectl's rollout-status rules per kind (:func:`rollout_status`), plus
one more: ``observedGeneration`` must reach the generation *our* patch produced, so a
rollout that finished before ours started is not mistaken for ours.

StatefulSets with ``updateStrategy: OnDelete`` roll nothing on a template change; for them
:func:`roll_ondelete` deletes pods in reverse ordinal order (as the RollingUpdate controller
would) and waits for each to come back Ready on the new revision.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rotate.clients.seams import Kube
from rotate.core.errors import ClientError, ForbiddenError, NotFoundError, PermanentError
from rotate.core.observation import Observation
from rotate.core.refs import ObjectRef
from rotate.core.timestamps import parse_rfc3339, rfc3339, utcnow
from rotate.core.waiting import CancelToken, Deadline, WaitTimeout, wait_for
from rotate.stages.kubewatch import WatchPause

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
RUN_ID_ANNOTATION = "rotate.dev/run-id"
RELOADER_AUTO = "reloader.stakater.com/auto"
RELOADER_SECRET_AUTO = "secret.reloader.stakater.com/auto"
RELOADER_SECRET_RELOAD = "secret.reloader.stakater.com/reload"
RELOADER_SEARCH = "reloader.stakater.com/search"
RELOADER_LAST = "reloader.stakater.com/last-reloaded-from"
WAVE = "wave.pusher.com/update-on-config-change"


@dataclass(frozen=True)
class Restart:
    generation: int
    stamp: str
    via: str  # "rotate" | "already" (resumed) | "reloader"


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def meta_annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return metadata(obj).get("annotations") or {}


def template_annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
        "annotations"
    ) or {}


def generation(obj: Mapping[str, Any]) -> int:
    return int(metadata(obj).get("generation") or 0)


def update_strategy(obj: Mapping[str, Any]) -> str:
    spec = obj.get("spec") or {}
    return str((spec.get("updateStrategy") or spec.get("strategy") or {}).get("type") or "")


def rollout_status(obj: Mapping[str, Any], min_generation: int = 0) -> tuple[bool, str]:
    """(done, message) by kubectl's rules for the object's kind. Raises PermanentError when
    the rollout can no longer succeed (ProgressDeadlineExceeded)."""
    done, seen = rollout_progress(obj, min_generation)
    return done, seen.detail


def _count(detail: str, done: int, total: int, unit: str) -> Observation:
    return Observation(detail, done, total, unit)


def rollout_progress(obj: Mapping[str, Any],
                     min_generation: int = 0) -> tuple[bool, Observation]:
    """:func:`rollout_status` with the message as an Observation: the count it states
    (``2/3 pods ready``) typed, for the step's progress."""
    kind = str(obj.get("kind") or "")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    gen = generation(obj)
    observed = int(status.get("observedGeneration") or 0)
    name = f"{kind.lower()}/{metadata(obj).get('namespace')}/{metadata(obj).get('name')}"
    if observed < max(gen, min_generation):
        return False, Observation(
            f"waiting for {name} spec update to be observed (generation {gen})")
    replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    if kind == "Deployment":
        for cond in status.get("conditions") or []:
            if (cond.get("type") == "Progressing"
                    and cond.get("reason") == "ProgressDeadlineExceeded"):
                raise PermanentError(
                    "kubernetes", f"rollout of {name}", "exceeded its progress deadline")
        updated = int(status.get("updatedReplicas") or 0)
        total = int(status.get("replicas") or 0)
        available = int(status.get("availableReplicas") or 0)
        if updated < replicas:
            return False, _count(f"{name}: {updated} of {replicas} new replicas updated",
                                 updated, replicas, "pods updated")
        if total > updated:
            return False, _count(f"{name}: {total - updated} old replicas pending termination",
                                 updated, total, "pods updated (old ones terminating)")
        if available < updated:
            return False, _count(f"{name}: {available} of {updated} updated replicas available",
                                 available, updated, "pods available")
        return True, _count(f"{name} rolled out ({updated}/{replicas} available)", updated,
                            replicas, "pods available")
    if kind == "StatefulSet":
        ready = int(status.get("readyReplicas") or 0)
        updated = int(status.get("updatedReplicas") or 0)
        if updated < replicas:
            return False, _count(f"{name}: {updated} of {replicas} pods updated", updated,
                                 replicas, "pods updated")
        if ready < replicas:
            return False, _count(f"{name}: waiting for {replicas - ready} pods to be ready",
                                 ready, replicas, "pods ready")
        if update_strategy(obj) != "OnDelete" and status.get("updateRevision") != status.get(
            "currentRevision"
        ):
            return False, Observation(
                f"{name}: rolling update to {status.get('updateRevision')} in progress")
        return True, _count(f"{name} rolled out ({ready}/{replicas} ready)", ready, replicas,
                            "pods ready")
    if kind == "DaemonSet":
        desired = int(status.get("desiredNumberScheduled") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        available = int(status.get("numberAvailable") or 0)
        if updated < desired:
            return False, _count(f"{name}: {updated} of {desired} updated pods scheduled",
                                 updated, desired, "pods updated")
        if available < desired:
            return False, _count(f"{name}: {available} of {desired} updated pods available",
                                 available, desired, "pods available")
        return True, _count(f"{name} rolled out ({available}/{desired} available)", available,
                            desired, "pods available")
    raise PermanentError("kubernetes", "rollout status", f"unsupported kind {kind!r}")


def restart_stamp() -> str:
    return rfc3339(utcnow())


def restart_of(obj: Mapping[str, Any], run_id: str) -> Restart | None:
    """The restart run ``run_id`` already made of the workload ``obj`` (resume), or None."""
    if meta_annotations(obj).get(RUN_ID_ANNOTATION) == run_id:
        return Restart(generation(obj), template_annotations(obj).get(RESTARTED_AT, ""), "already")
    return None


def restart(kube: Kube, ref: ObjectRef, run_id: str,
            seen: Mapping[str, Any] | None = None) -> Restart:
    """Patch the pod template (a new rollout) and tag the workload with the run id.

    ``seen``: the workload as the caller read it just before, in the same attempt — its
    check for a restart already made stands in for a read of its own (one GET fewer)."""
    already = restart_of(seen if seen is not None else
                         kube.get(ref.kind, ref.namespace, ref.name), run_id)
    if already is not None:
        return already
    stamp = restart_stamp()
    body = {
        "metadata": {"annotations": {RUN_ID_ANNOTATION: run_id}},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}},
    }
    obj = kube.patch(ref.kind, ref.namespace, ref.name, body, patch_type="merge")
    return Restart(generation(obj), stamp, "rotate")


#: wait_rollout reads the workload again after this long without a watch event
_REREAD = 2.0


def wait_rollout(
    kube: Kube, ref: ObjectRef, min_generation: int, *, deadline: Deadline,
    cancel: CancelToken | None = None,
) -> str:
    """Wait until the workload's rollout completes (see :func:`rollout_status`), judged on
    the newest object its watch delivered — a state after the watch began, and
    ``min_generation`` rules out one before ours.  A GET reads it first, and again when no
    event came for :data:`_REREAD` seconds (a watch that missed a change costs that much
    time, never a wrong verdict)."""
    last = [Observation("nothing observed yet")]
    read_at = [float("-inf")]

    def check() -> str | None:
        seen = pause.take()
        if seen is None and time.monotonic() - read_at[0] < _REREAD:
            return None  # no event since the last read: nothing changed
        obj = kube.get(ref.kind, ref.namespace, ref.name) if seen is None else {
            **seen, "kind": ref.kind}
        read_at[0] = time.monotonic()
        done, observed = rollout_progress(obj, min_generation)
        last[0] = observed
        return observed.detail if done else None

    with WatchPause(kube, ref.kind, ref.namespace, ref.name) as pause:
        return wait_for(check, deadline=deadline, what=f"rollout of {ref}",
                        describe=lambda: last[0], cancel=cancel, pause=pause)


def terminating_pods(kube: Kube, obj: Mapping[str, Any]) -> list[str]:
    """Names of the workload's pods (its ``matchLabels``) being deleted: ``deletionTimestamp``
    set, their containers still draining (preStop, SIGTERM, the grace period).  Empty when it
    has no selector."""
    selector = pod_selector(obj)
    if selector is None:
        return []
    pods = kube.list("Pod", str(metadata(obj).get("namespace")), label_selector=selector)
    return sorted(str(metadata(p).get("name")) for p in pods
                  if metadata(p).get("deletionTimestamp"))


def wait_old_pods_gone(kube: Kube, ref: ObjectRef, *, deadline: Deadline,
                       cancel: CancelToken | None = None) -> str:
    """Wait until no pod of the workload is Terminating.  Called after its rollout completed:
    then every live pod is of the current revision (rollout status counts only pods without a
    ``deletionTimestamp``), so the pods left over from the previous revision are exactly the
    terminating ones — still answering the requests routed to them before their endpoint
    went, with the credential they started with.  Only once they exited may that credential
    be retired (overlap), or a request they still serve fails its login."""
    obj = kube.get(ref.kind, ref.namespace, ref.name)
    last = [Observation("nothing observed yet")]

    def check() -> str | None:
        try:
            old = terminating_pods(kube, obj)
        except ForbiddenError:
            # list pods is preflighted for Deployment consumers only: a role without it
            # keeps the behaviour before this wait, and says so
            return f"old pods not checked (no permission to list pods in {ref.namespace})"
        if not old:
            return "no old pod left"
        last[0] = Observation(f"{len(old)} old pod{'s' if len(old) > 1 else ''} terminating"
                              f" ({', '.join(old[:3])}{', ...' if len(old) > 3 else ''})")
        return None

    return wait_for(check, deadline=deadline, what=f"old pods of {ref} to exit",
                    describe=lambda: last[0], cancel=cancel)


# --------------------------------------------------------------------------- OnDelete


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


ONDELETE_ACTION = {
    "StatefulSet": "delete pods in reverse ordinal order, each Ready on the new revision",
    "DaemonSet": "delete its pods one at a time, each replacement Ready on the new template",
}


def roll_ondelete(
    kube: Kube, ref: ObjectRef, min_generation: int, *, deadline: Deadline,
    cancel: CancelToken | None = None,
) -> str:
    """Roll an ``updateStrategy: OnDelete`` workload, where a template patch rolls nothing."""
    if ref.kind == "DaemonSet":
        return _roll_ondelete_daemonset(kube, ref, min_generation, deadline=deadline,
                                        cancel=cancel)
    return _roll_ondelete_statefulset(kube, ref, min_generation, deadline=deadline,
                                      cancel=cancel)


#: the DaemonSet controller labels each pod with the template generation it was made from
#: (kept in this annotation on the DaemonSet; metadata.generation where it is absent)
DS_TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


def _roll_ondelete_daemonset(
    kube: Kube, ref: ObjectRef, min_generation: int, *, deadline: Deadline,
    cancel: CancelToken | None = None,
) -> str:
    """Delete the DaemonSet's pods made from an older template, one at a time, each after the
    previous replacement is Ready; pods already current are left alone (idempotent)."""

    def target() -> tuple[str, str] | None:
        obj = kube.get(ref.kind, ref.namespace, ref.name)
        status = obj.get("status") or {}
        if int(status.get("observedGeneration") or 0) < max(generation(obj), min_generation):
            return None
        want = meta_annotations(obj).get(DS_TEMPLATE_GENERATION) or str(generation(obj))
        return want, str(metadata(obj).get("uid") or "")

    def owned(uid: str) -> list[dict[str, Any]]:
        return [p for p in kube.list("Pod", ref.namespace)
                if any(o.get("uid") == uid for o in metadata(p).get("ownerReferences") or [])
                and not metadata(p).get("deletionTimestamp")]

    def current(pod: Mapping[str, Any], want: str) -> bool:
        return (metadata(pod).get("labels") or {}).get("pod-template-generation") == want

    replaced = 0
    with WatchPause(kube, "Pod", ref.namespace) as pause:
        want, uid = wait_for(target, deadline=deadline, what=f"{ref} to observe the template",
                             cancel=cancel, pause=pause)
        while True:
            old = [p for p in owned(uid) if not current(p, want)]
            if not old:
                break
            name = str(metadata(old[0]).get("name"))
            with contextlib.suppress(NotFoundError):
                kube.delete("Pod", ref.namespace, name)
            replaced += 1

            def back(gone: str = name) -> bool | None:
                pods = owned(uid)
                if any(metadata(p).get("name") == gone for p in pods):
                    return None
                fresh = [p for p in pods if current(p, want)]
                return True if fresh and all(_pod_ready(p) for p in fresh) else None

            wait_for(back, deadline=deadline, what=f"a Ready pod of {ref} replacing {name}",
                     cancel=cancel, pause=pause)
    return f"{ref}: {replaced} pod(s) replaced one at a time"


def _roll_ondelete_statefulset(
    kube: Kube, ref: ObjectRef, min_generation: int, *, deadline: Deadline,
    cancel: CancelToken | None = None,
) -> str:
    """Delete the StatefulSet's pods in reverse ordinal order, each after the previous one is
    back Ready on the update revision; pods already on it are left alone (idempotent)."""

    def revision() -> tuple[str, int] | None:
        obj = kube.get(ref.kind, ref.namespace, ref.name)
        status = obj.get("status") or {}
        if int(status.get("observedGeneration") or 0) < max(generation(obj), min_generation):
            return None
        rev = str(status.get("updateRevision") or "")
        replicas = (obj.get("spec") or {}).get("replicas")
        return (rev, 1 if replicas is None else int(replicas)) if rev else None

    with WatchPause(kube, "Pod", ref.namespace) as pause:
        rev, replicas = wait_for(revision, deadline=deadline, what=f"{ref} update revision",
                                 cancel=cancel, pause=pause)
        for ordinal in reversed(range(replicas)):
            pod_name = f"{ref.name}-{ordinal}"

            def on_revision(name: str = pod_name) -> bool | None:
                try:
                    pod = kube.get("Pod", ref.namespace, name)
                except NotFoundError:
                    return None
                labels = metadata(pod).get("labels") or {}
                if labels.get("controller-revision-hash") != rev or metadata(pod).get(
                    "deletionTimestamp"
                ):
                    return False
                return True if _pod_ready(pod) else None

            if on_revision() is False:
                with contextlib.suppress(NotFoundError):
                    kube.delete("Pod", ref.namespace, pod_name)
            def replaced(name: str = pod_name) -> bool | None:
                return on_revision(name) or None

            wait_for(replaced, deadline=deadline,
                     what=f"pod {ref.namespace}/{pod_name} Ready on {rev}", cancel=cancel,
                     pause=pause)
    return f"{ref}: {replicas} pods replaced in reverse ordinal order"


# --------------------------------------------------------------------------- Reloader


def reloader_watches(obj: Mapping[str, Any], secret_name: str) -> str | None:
    """Which other reloader will roll this workload when ``secret_name`` changes, if any."""
    ann = meta_annotations(obj)
    if ann.get(RELOADER_AUTO) == "true" or ann.get(RELOADER_SECRET_AUTO) == "true":
        return f"Reloader ({RELOADER_AUTO})"
    names = [n.strip() for n in ann.get(RELOADER_SECRET_RELOAD, "").split(",") if n.strip()]
    if secret_name in names:
        return f"Reloader ({RELOADER_SECRET_RELOAD})"
    if ann.get(RELOADER_SEARCH) == "true":
        return f"Reloader ({RELOADER_SEARCH})"
    if ann.get(WAVE) == "true":
        return f"Wave ({WAVE})"
    return None


#: Vault Secrets Operator kinds whose ``spec.rolloutRestartTargets`` roll workloads
VSO_KINDS = ("VaultStaticSecret", "VaultDynamicSecret")


def vso_watches(vso_objects: Iterable[Mapping[str, Any]], kind: str, name: str) -> str | None:
    """The VSO object that lists workload ``kind``/``name`` in its rolloutRestartTargets."""
    for o in vso_objects:
        for target in (o.get("spec") or {}).get("rolloutRestartTargets") or []:
            if target.get("kind") == kind and target.get("name") == name:
                meta = o.get("metadata") or {}
                return (f"Vault Secrets Operator ({o.get('kind')} {meta.get('namespace')}/"
                        f"{meta.get('name')} rolloutRestartTargets)")
    return None


@dataclass(frozen=True)
class Baseline:
    """What a workload looked like before the Secret changed (to see whether Reloader rolled)."""

    generation: int
    last_reloaded: str

    def to_json(self) -> dict[str, Any]:
        return {"generation": self.generation, "last_reloaded": self.last_reloaded}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Baseline:
        return cls(int(data.get("generation") or 0), str(data.get("last_reloaded") or ""))


def baseline(obj: Mapping[str, Any]) -> Baseline:
    return Baseline(generation(obj), template_annotations(obj).get(RELOADER_LAST, ""))


def reloaded_from(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """Reloader's ``last-reloaded-from`` record on the pod template ({} when absent or not
    JSON): ``{"type", "name", "namespace", "hash", ...}`` — which Secret it reloaded for."""
    raw = template_annotations(obj).get(RELOADER_LAST, "")
    try:
        record = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _reloader_rolled(obj: Mapping[str, Any], before: Baseline,
                     secret: tuple[str, str]) -> bool:
    """Did *Reloader* (not a ``kubectl rollout restart``, not another run's restartedAt)
    change the template since ``before``, for ``secret`` (namespace, name)?  Reloader writes
    a new ``last-reloaded-from`` naming the Secret; a record without names is accepted."""
    now = baseline(obj)
    if now.last_reloaded == before.last_reloaded:
        return False
    record = reloaded_from(obj)
    named = (record.get("namespace"), record.get("name"))
    return named == (None, None) or named == secret or named == (None, secret[1])


def match_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """The workload's ``matchLabels`` (empty: it has none)."""
    return ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}


def pod_selector(obj: Mapping[str, Any]) -> str | None:
    """The workload's ``matchLabels`` as a label selector (None: it has none)."""
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels(obj).items())) or None


def pods_started_after(kube: Kube, obj: Mapping[str, Any], since: datetime) -> str | None:
    """None when every live pod of the workload started at or after ``since`` (second
    precision, as Kubernetes keeps it); else the reason.  A pod started before the Secret held
    the new value read the old one, whoever rolled it."""
    meta = metadata(obj)
    selector = pod_selector(obj)
    if selector is None:
        return "the workload has no matchLabels selector to find its pods"
    try:
        pods = kube.list("Pod", str(meta.get("namespace")), label_selector=selector)
    except ClientError as exc:
        return f"cannot list its pods ({exc.reason})"
    live = [p for p in pods if not metadata(p).get("deletionTimestamp")]
    if not live:
        return "no live pods"
    floor = since.replace(microsecond=0)
    for pod in live:
        started = (pod.get("status") or {}).get("startTime") or metadata(pod).get(
            "creationTimestamp")
        if not started or parse_rfc3339(str(started)) < floor:
            return (f"pod {metadata(pod).get('name')} started {started or 'at an unknown time'}, "
                    f"before the Secret held the new value ({rfc3339(since, micro=False)})")
    return None


@dataclass(frozen=True)
class ReloaderVerdict:
    """What :func:`wait_for_reloader` saw: the roll taken as Reloader's, or None and why."""

    restart: Restart | None
    why: str


def wait_for_reloader(
    kube: Kube, ref: ObjectRef, before: Baseline, *, secret: tuple[str, str],
    synced_at: datetime, grace: float, deadline: Deadline, cancel: CancelToken | None = None,
    by_reloader: bool = True,
) -> ReloaderVerdict:
    """Watch up to ``grace`` seconds for Reloader's roll of ``ref``; accept it only when its
    rollout completes (by ``deadline``) with every pod started after ``synced_at``, the time
    the Secret held the new value.  Otherwise the caller rolls: a second roll costs a pod
    start, taking a stale roll for ours costs the provider the new value.
    ``by_reloader``: the roll must carry Reloader's record for ``secret``; False (Wave, VSO)
    takes any template change, still subject to the pod check."""

    def rolled() -> int | None:
        obj = kube.get(ref.kind, ref.namespace, ref.name)
        if by_reloader:
            return generation(obj) if _reloader_rolled(obj, before, secret) else None
        return generation(obj) if generation(obj) > before.generation else None

    with WatchPause(kube, ref.kind, ref.namespace, ref.name) as pause:
        try:
            gen = wait_for(rolled, deadline=Deadline.after(grace), what=f"Reloader on {ref}",
                           cancel=cancel, pause=pause)
        except WaitTimeout:
            return ReloaderVerdict(None, f"no roll within {grace:g}s")
    wait_rollout(kube, ref, gen, deadline=deadline, cancel=cancel)
    obj = kube.get(ref.kind, ref.namespace, ref.name)
    stale = pods_started_after(kube, obj, synced_at)
    if stale is not None:
        return ReloaderVerdict(None, f"a roll (generation {gen}) came but {stale}")
    return ReloaderVerdict(Restart(generation(obj), baseline(obj).last_reloaded, "reloader"),
                           f"rolled it (generation {generation(obj)}), its pods started "
                           "after the Secret held the new value")
