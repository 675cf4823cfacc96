"""Deployment controller: Deployment → ReplicaSets, with Kubernetes' rollout semantics.

What kubectl and ``rotate`` read is reproduced field for field, because both decide "rolled
out" from it (kubectl's rollout status: ``observedGeneration >= generation``,
``updatedReplicas == spec.replicas``, ``status.replicas == updatedReplicas`` — old pods gone —,
``availableReplicas == updatedReplicas``; a Progressing condition with reason
``ProgressDeadlineExceeded`` is a failure).

- One ReplicaSet per pod template, named ``<deployment>-<pod-template-hash>``; the hash label
  goes on the RS selector, template and pods.  The "new" RS is the one whose template equals
  the Deployment's, ignoring the hash label — so a template that comes back (a rollback, or
  undoing an annotation) reuses its old RS.
- ``deployment.kubernetes.io/revision``: the new RS gets max(revision of the others) + 1 when
  it is created *or* when an old one becomes new again (its previous numbers are kept in
  ``deployment.kubernetes.io/revision-history``); the Deployment carries the new RS's number.
  The Deployment's own annotations are copied to a new RS (that is how ``kubectl rollout
  history`` shows ``kubernetes.io/change-cause``).
- RollingUpdate follows the upstream algorithm: scale the new RS up to at most
  ``replicas + maxSurge`` pods in total, scale old ones down while keeping at least
  ``replicas - maxUnavailable`` available (unhealthy old pods go first).  maxSurge rounds up,
  maxUnavailable down, both 25% by default, and both 0 means maxUnavailable 1.  Recreate
  scales old RSs to 0 and waits until their pods are gone before scaling the new one.
- ``spec.paused``: no new RS, no rollout; a lone RS is still scaled and status is still kept
  (Progressing Unknown/DeploymentPaused).
- Status: replicas/updated/ready/available from the RSs' *status* (actual pods), unavailable =
  spec − available; conditions Available and Progressing with upstream reasons and the rule
  that Progressing's ``lastUpdateTime`` moves only when the rollout makes progress — which
  is what ``progressDeadlineSeconds`` is measured from.
- Old RSs are kept at 0 replicas; beyond ``revisionHistoryLimit`` the oldest are deleted once
  a rollout is complete.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from typing import Any

from rotate_lab.cluster.api.store import ApiError, now_rfc3339
from rotate_lab.cluster.controllers.base import (
    Key,
    OwnerController,
)
from rotate_lab.cluster.controllers.replicaset import owner_reference, parse_time

Obj = dict[str, Any]

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
#: Deployment annotations that are not copied to its ReplicaSets (as upstream).
_NOT_COPIED = {REVISION, REVISION_HISTORY, DESIRED, MAX_REPLICAS,
               "kubectl.kubernetes.io/last-applied-configuration",
               "deprecated.deployment.rollback.to"}
_SAFE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Obj, collision_count: int = 0) -> str:
    """fnv-1a/32 over the canonical template, encoded with Kubernetes' safe alphabet."""
    h = 0x811C9DC5
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_CHARS[ord(c) % len(_SAFE_CHARS)] for c in str(h))


def _without_hash(template: Obj) -> Obj:
    t = copy.deepcopy(template)
    labels = (t.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    return t


def revision_of(rs: Obj) -> int:
    try:
        return int(((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def resolve_fenceposts(d: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as pod counts, rounded as upstream does."""
    spec = d.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    ru = ((spec.get("strategy") or {}).get("rollingUpdate") or {})

    def scaled(value: Any, default: str, round_up: bool) -> int:
        v = default if value is None else value
        if isinstance(v, str) and v.endswith("%"):
            frac = replicas * int(v[:-1]) / 100
            return math.ceil(frac) if round_up else math.floor(frac)
        return int(v)

    surge = scaled(ru.get("maxSurge"), "25%", True)
    unavailable = scaled(ru.get("maxUnavailable"), "25%", False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _condition(status: Obj, ctype: str) -> Obj | None:
    for c in status.get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def _set_condition(status: Obj, ctype: str, value: str, reason: str, message: str, *,
                   touch: bool = False) -> None:
    """Upstream SetDeploymentCondition: no-op when status and reason are unchanged (unless
    ``touch``, which Progressing uses to record progress); lastTransitionTime moves only when
    the status changes."""
    now = now_rfc3339()
    conds = [dict(c) for c in status.get("conditions") or []]
    current = next((c for c in conds if c.get("type") == ctype), None)
    if current and current.get("status") == value and current.get("reason") == reason \
            and not touch:
        return
    new = {"type": ctype, "status": value, "lastUpdateTime": now, "lastTransitionTime": now,
           "reason": reason, "message": message}
    if current and current.get("status") == value:
        new["lastTransitionTime"] = current.get("lastTransitionTime", now)
    conds = [c for c in conds if c.get("type") != ctype] + [new]
    order = {"Available": 0, "Progressing": 1, "ReplicaFailure": 2}
    status["conditions"] = sorted(conds, key=lambda c: order.get(str(c.get("type")), 9))


class DeploymentController(OwnerController):
    name = "deployment"
    kinds = ("Deployment", "ReplicaSet")

    # -- store helpers -------------------------------------------------------------------

    def _owned_rs(self, d: Obj) -> list[Obj]:
        return sorted(self.owned("ReplicaSet", d),
                      key=lambda r: (str(r["metadata"].get("creationTimestamp")),
                                     r["metadata"]["name"]))

    def _scale(self, rs: Obj, replicas: int, d: Obj) -> Obj:
        surge, _ = resolve_fenceposts(d)
        want = int(d["spec"].get("replicas", 1))
        notes = {DESIRED: str(want), MAX_REPLICAS: str(want + surge)}
        anns = rs["metadata"].get("annotations") or {}
        if rs["spec"].get("replicas") == replicas and all(anns.get(k) == v
                                                            for k, v in notes.items()):
            return rs

        def edit(obj: Obj) -> None:
            obj["spec"]["replicas"] = replicas
            obj["metadata"].setdefault("annotations", {}).update(notes)

        return self.ctx.store.mutate("ReplicaSet", rs["metadata"]["namespace"],
                                     rs["metadata"]["name"], edit)

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        try:
            d = self.ctx.store.get("Deployment", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                return None  # the store cascades the deletion to its ReplicaSets
            raise
        spec = d.get("spec") or {}
        all_rs = self._owned_rs(d)
        template = _without_hash(spec.get("template") or {})
        new_rs = next((rs for rs in all_rs
                       if _without_hash(rs["spec"].get("template") or {}) == template), None)
        old_rs = [rs for rs in all_rs if rs is not new_rs]
        created = False
        if spec.get("paused"):
            active = [rs for rs in all_rs if rs["spec"].get("replicas", 0) > 0]
            if len(active) == 1:
                self._scale(active[0], int(spec.get("replicas", 1)), d)
            elif not active and new_rs is not None:
                self._scale(new_rs, int(spec.get("replicas", 1)), d)
        else:
            new_rs, created = self._sync_new_rs(d, new_rs, old_rs)
            if (spec.get("strategy") or {}).get("type") == "Recreate":
                self._recreate(d, new_rs, old_rs)
            else:
                self._rolling(d, new_rs, old_rs)
        all_rs = self._owned_rs(d)
        new_rs = next((rs for rs in all_rs if new_rs is not None
                       and rs["metadata"]["uid"] == new_rs["metadata"]["uid"]), None)
        return self._sync_status(d, new_rs, all_rs, created)

    def _sync_new_rs(self, d: Obj, new_rs: Obj | None, old_rs: list[Obj]) -> tuple[Obj, bool]:
        """Find or create the RS of the current template and give it the next revision."""
        store = self.ctx.store
        ns, dname = d["metadata"]["namespace"], d["metadata"]["name"]
        revision = max((revision_of(rs) for rs in old_rs), default=0) + 1
        if new_rs is not None:
            current = revision_of(new_rs)
            # Upstream keeps copying the Deployment's annotations (change-cause…) to its new RS.
            copied = {k: v for k, v in (d["metadata"].get("annotations") or {}).items()
                      if k not in _NOT_COPIED}
            have = new_rs["metadata"].get("annotations") or {}
            if current < revision or any(have.get(k) != v for k, v in copied.items()):
                def bump(obj: Obj) -> None:
                    anns = obj["metadata"].setdefault("annotations", {})
                    anns.update(copied)
                    if current < revision:
                        if current:
                            history = [h for h in anns.get(REVISION_HISTORY, "").split(",")
                                       if h]
                            anns[REVISION_HISTORY] = ",".join([*history, str(current)])
                        anns[REVISION] = str(revision)

                new_rs = store.mutate("ReplicaSet", ns, new_rs["metadata"]["name"], bump)
            self._set_deployment_revision(d, revision_of(new_rs))
            return new_rs, False
        template = copy.deepcopy(d["spec"].get("template") or {})
        collisions = int((d.get("status") or {}).get("collisionCount") or 0)
        phash = template_hash(_without_hash(template), collisions)
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: phash}
        selector = copy.deepcopy(d["spec"].get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: phash}
        surge, _ = resolve_fenceposts(d)
        want = int(d["spec"].get("replicas", 1))
        anns = {k: v for k, v in (d["metadata"].get("annotations") or {}).items()
                if k not in _NOT_COPIED}
        anns.update({REVISION: str(revision), DESIRED: str(want),
                     MAX_REPLICAS: str(want + surge)})
        rs = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{dname}-{phash}", "namespace": ns,
                         "labels": dict(tmeta["labels"]), "annotations": anns,
                         "ownerReferences": [owner_reference(d)]},
            "spec": {"replicas": 0, "minReadySeconds": int(d["spec"].get("minReadySeconds") or 0),
                     "selector": selector, "template": template},
        }
        try:
            created = store.create("ReplicaSet", rs)
        except ApiError as exc:
            if exc.reason != "AlreadyExists":
                raise
            # Hash collision with a foreign RS: bump collisionCount, as upstream; retry soon.
            store.mutate("Deployment", ns, dname, lambda o: o.setdefault("status", {}).update(
                collisionCount=collisions + 1), subresource="status")
            raise
        self._set_deployment_revision(d, revision)
        return created, True

    def _set_deployment_revision(self, d: Obj, revision: int) -> None:
        if (d["metadata"].get("annotations") or {}).get(REVISION) == str(revision):
            return
        self.ctx.store.mutate(
            "Deployment", d["metadata"]["namespace"], d["metadata"]["name"],
            lambda o: o["metadata"].setdefault("annotations", {}).update(
                {REVISION: str(revision)}))

    def _recreate(self, d: Obj, new_rs: Obj, old_rs: list[Obj]) -> None:
        for rs in old_rs:
            if rs["spec"].get("replicas", 0):
                self._scale(rs, 0, d)
        if any((rs.get("status") or {}).get("replicas", 0) for rs in old_rs):
            return  # wait for the old pods to be gone
        self._scale(new_rs, int(d["spec"].get("replicas", 1)), d)

    def _rolling(self, d: Obj, new_rs: Obj, old_rs: list[Obj]) -> None:
        want = int(d["spec"].get("replicas", 1))
        surge, max_unavailable = resolve_fenceposts(d)
        # 1. scale the new RS up within the surge budget (or down to the target).
        new_count = int(new_rs["spec"].get("replicas", 0))
        if new_count > want:
            new_rs = self._scale(new_rs, want, d)
        elif new_count < want:
            total = new_count + sum(int(rs["spec"].get("replicas", 0)) for rs in old_rs)
            up = min(want + surge - total, want - new_count)
            if up > 0:
                new_rs = self._scale(new_rs, new_count + up, d)
                self.ctx.store.record_event(
                    d, "ScalingReplicaSet",
                    f"Scaled up replica set {new_rs['metadata']['name']} from {new_count} to "
                    f"{new_count + up}")
        # 2. scale old RSs down while keeping minAvailable.
        old_total = sum(int(rs["spec"].get("replicas", 0)) for rs in old_rs)
        if old_total == 0:
            return
        all_total = old_total + int(new_rs["spec"].get("replicas", 0))
        min_available = want - max_unavailable
        new_status = new_rs.get("status") or {}
        new_unavailable = int(new_rs["spec"].get("replicas", 0)) - int(
            new_status.get("availableReplicas", 0))
        budget = all_total - min_available - new_unavailable
        if budget <= 0:
            return
        # 2a. unhealthy old pods first: they add nothing to availability.
        remaining: list[tuple[Obj, int]] = []
        for rs in old_rs:
            count = int(rs["spec"].get("replicas", 0))
            unhealthy = count - int((rs.get("status") or {}).get("availableReplicas", 0))
            cut = min(budget, max(0, unhealthy))
            if cut > 0:
                rs = self._scale(rs, count - cut, d)
                budget -= cut
            remaining.append((rs, int(rs["spec"].get("replicas", 0))))
        # 2b. then healthy ones, oldest RS first, down to minAvailable available pods.
        available = sum(int((rs.get("status") or {}).get("availableReplicas", 0))
                        for rs in [*old_rs, new_rs])
        to_cut = min(budget, available - min_available)
        for rs, count in remaining:
            if to_cut <= 0:
                break
            cut = min(count, to_cut)
            if cut > 0:
                self._scale(rs, count - cut, d)
                self.ctx.store.record_event(
                    d, "ScalingReplicaSet",
                    f"Scaled down replica set {rs['metadata']['name']} from {count} to "
                    f"{count - cut}")
                to_cut -= cut

    def _cleanup(self, d: Obj, new_rs: Obj | None, all_rs: list[Obj]) -> None:
        limit = int(d["spec"].get("revisionHistoryLimit", 10))
        old = sorted((rs for rs in all_rs if new_rs is None
                      or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]),
                     key=revision_of)
        idle = [rs for rs in old if not rs["spec"].get("replicas")
                and not (rs.get("status") or {}).get("replicas")]
        for rs in idle[:max(0, len(old) - limit)]:
            try:
                self.ctx.store.delete("ReplicaSet", rs["metadata"]["namespace"],
                                      rs["metadata"]["name"])
            except ApiError as exc:
                if exc.code != 404:
                    raise

    def _sync_status(self, d: Obj, new_rs: Obj | None, all_rs: list[Obj],
                     created: bool) -> float | None:
        spec = d["spec"]
        want = int(spec.get("replicas", 1))
        _, max_unavailable = resolve_fenceposts(d)
        old_status = d.get("status") or {}

        def total(field: str, sets: list[Obj]) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0)) for rs in sets)

        status: Obj = copy.deepcopy(old_status)
        status.update(
            observedGeneration=d["metadata"].get("generation", 1),
            replicas=total("replicas", all_rs),
            updatedReplicas=total("replicas", [new_rs] if new_rs else []),
            readyReplicas=total("readyReplicas", all_rs),
            availableReplicas=total("availableReplicas", all_rs),
        )
        status["unavailableReplicas"] = max(0, want - status["availableReplicas"])
        if status["availableReplicas"] >= want - max_unavailable:
            _set_condition(status, "Available", "True", "MinimumReplicasAvailable",
                           "Deployment has minimum availability.")
        else:
            _set_condition(status, "Available", "False", "MinimumReplicasUnavailable",
                           "Deployment does not have minimum availability.")
        requeue: float | None = None
        deadline = spec.get("progressDeadlineSeconds")
        rs_name = new_rs["metadata"]["name"] if new_rs else ""
        complete = (new_rs is not None and status["updatedReplicas"] == want
                    and status["replicas"] == want and status["availableReplicas"] == want)
        if spec.get("paused"):
            _set_condition(status, "Progressing", "Unknown", "DeploymentPaused",
                           "Deployment is paused")
        elif deadline is not None and new_rs is not None:
            cond = _condition(status, "Progressing")
            if cond and cond.get("reason") == "DeploymentPaused":
                _set_condition(status, "Progressing", "Unknown", "DeploymentResumed",
                               "Deployment is resumed")
            if created:
                _set_condition(status, "Progressing", "True", "NewReplicaSetCreated",
                               f'Created new replica set "{rs_name}"')
            elif complete:
                _set_condition(status, "Progressing", "True", "NewReplicaSetAvailable",
                               f'ReplicaSet "{rs_name}" has successfully progressed.')
            elif self._progressed(old_status, status) or cond is None:
                _set_condition(status, "Progressing", "True", "ReplicaSetUpdated",
                               f'ReplicaSet "{rs_name}" is progressing.', touch=True)
            cond = _condition(status, "Progressing") or {}
            if not complete and cond.get("reason") not in ("ProgressDeadlineExceeded",
                                                           "NewReplicaSetAvailable"):
                since = parse_time(cond.get("lastUpdateTime")) or 0.0
                left = since + int(deadline) - datetime.now(UTC).timestamp()
                if left <= 0:
                    _set_condition(status, "Progressing", "False", "ProgressDeadlineExceeded",
                                   f'ReplicaSet "{rs_name}" has timed out progressing.')
                    self.ctx.store.record_event(
                        d, "ProgressDeadlineExceeded",
                        f'Deployment "{d["metadata"]["name"]}" has timed out progressing.',
                        type="Warning")
                else:
                    requeue = left + 1.0  # timestamps have one-second resolution
        if complete:
            self._cleanup(d, new_rs, all_rs)
        if status != old_status:
            self.ctx.store.mutate("Deployment", d["metadata"]["namespace"],
                                  d["metadata"]["name"],
                                  lambda o: o.__setitem__("status", status),
                                  subresource="status")
        return requeue

    @staticmethod
    def _progressed(old: Obj, new: Obj) -> bool:
        """Upstream DeploymentProgressing: any count moved toward the goal."""
        def g(s: Obj, f: str) -> int:
            return int(s.get(f, 0))

        return (g(new, "updatedReplicas") > g(old, "updatedReplicas")
                or g(new, "readyReplicas") > g(old, "readyReplicas")
                or g(new, "availableReplicas") > g(old, "availableReplicas")
                or (g(old, "replicas") - g(old, "updatedReplicas"))
                > (g(new, "replicas") - g(new, "updatedReplicas")))
