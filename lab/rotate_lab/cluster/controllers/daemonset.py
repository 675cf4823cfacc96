"""DaemonSet controller: one pod per node, on a cluster of one node (``lab-node``).

- Revisions: each pod template is a ControllerRevision ``NAME-<hash>`` whose labels are the
  template's plus ``controller-revision-hash: <hash>`` (``revision`` grows per new template;
  a template that comes back gets the next number) — what ``kubectl rollout history
  daemonset`` lists and ``rollout undo`` would restore.  Every pod carries the hash it was
  made from in ``controller-revision-hash`` and the DaemonSet's generation at creation in
  ``pod-template-generation``, as upstream does.
- Pods are named ``NAME-<5 chars>`` with a controller ``ownerReference`` and
  ``spec.nodeName: lab-node`` (upstream pins them with node affinity and the scheduler binds
  them; with one node the outcome is the same).
- ``updateStrategy: RollingUpdate`` (the default the API server fills in): a pod not on the
  update revision is deleted and, once gone, replaced from the new template.  With one node
  and ``maxUnavailable: 1`` that is upstream's whole algorithm; ``maxSurge`` is not
  emulated (a surge pod would mean two daemon pods on one node).
- ``updateStrategy: OnDelete``: a template change replaces nothing; a pod someone deletes is
  recreated from the *update* revision.
- Status: exactly the fields kubectl's DaemonSet rollout-status reads
  (``desiredNumberScheduled``, ``updatedNumberScheduled``, ``numberAvailable``,
  ``observedGeneration``) plus ``currentNumberScheduled``, ``numberReady``,
  ``numberUnavailable`` and ``numberMisscheduled``.  ``observedGeneration`` is written only
  together with the counts for that generation, so a reader never sees a new generation
  "observed" with the previous template's counts.
"""

from __future__ import annotations

import copy
from typing import Any

from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.controllers.base import (
    Key,
    OwnerController,
)
from rotate_lab.cluster.controllers.deployment import template_hash
from rotate_lab.cluster.controllers.replicaset import (
    count_available,
    owner_reference,
    pod_from_template,
    pod_is_active,
)

Obj = dict[str, Any]

NODE_NAME = "lab-node"
REVISION_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"


def _hash_of(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL, ""))


def _created(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("creationTimestamp") or "")


class DaemonSetController(OwnerController):
    name = "daemonset"
    kinds = ("DaemonSet", "Pod")

    # -- revisions ------------------------------------------------------------------------

    def _ensure_revision(self, ds: Obj) -> str:
        """The update revision's hash; its ControllerRevision exists and has the top number."""
        ns, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
        template = copy.deepcopy(ds["spec"].get("template") or {})
        digest = template_hash(template)
        rev_name = f"{name}-{digest}"
        revisions = self.owned("ControllerRevision", ds)
        top = max((int(r.get("revision", 0)) for r in revisions), default=0)
        existing = next((r for r in revisions if r["metadata"]["name"] == rev_name), None)
        if existing is None:
            self.ctx.store.create("ControllerRevision", {
                "apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": rev_name, "namespace": ns,
                             "labels": {**((template.get("metadata") or {}).get("labels") or {}),
                                        REVISION_LABEL: digest},
                             "ownerReferences": [owner_reference(ds)]},
                "data": {"spec": {"template": {**template, "$patch": "replace"}}},
                "revision": top + 1,
            })
        elif int(existing.get("revision", 0)) < top:
            self.ctx.store.mutate("ControllerRevision", ns, rev_name,
                                  lambda o: o.__setitem__("revision", top + 1))
        return digest

    # -- reconcile ------------------------------------------------------------------------

    def _pods(self, ds: Obj) -> list[Obj]:
        return sorted((p for p in self.owned("Pod", ds) if pod_is_active(p)), key=_created)

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        try:
            ds = self.ctx.store.get("DaemonSet", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                return None  # pods and revisions go with it (store cascade)
            raise
        strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        update_hash = self._ensure_revision(ds)
        self._manage(ds, self._pods(ds), rolling, update_hash)
        return self._sync_status(ds, self._pods(ds), update_hash)

    def _manage(self, ds: Obj, pods: list[Obj], rolling: bool, update_hash: str) -> None:
        # One daemon pod per node: the oldest stays, any extra goes (upstream keeps the
        # oldest too, so a duplicate made by a racing create never displaces a serving pod).
        for extra in pods[1:]:
            self._delete(ds, extra)
        if not pods:
            self._create(ds, update_hash)
            return
        pod = pods[0]
        if rolling and _hash_of(pod) != update_hash:
            # maxUnavailable 1 on one node: the old pod goes first; its DELETED event brings
            # us back here to create the replacement.
            self._delete(ds, pod)

    def _create(self, ds: Obj, update_hash: str) -> None:
        template = {k: v for k, v in (ds["spec"].get("template") or {}).items()
                    if k != "$patch"}
        pod = pod_from_template(ds, template, extra_labels={
            REVISION_LABEL: update_hash,
            GENERATION_LABEL: str(ds["metadata"].get("generation", 1))})
        pod["spec"]["nodeName"] = NODE_NAME
        created = self.ctx.store.create("Pod", pod)
        self.ctx.store.record_event(ds, "SuccessfulCreate",
                                    f"Created pod: {created['metadata']['name']}")

    def _delete(self, ds: Obj, pod: Obj) -> None:
        pod_name = pod["metadata"]["name"]
        try:
            self.ctx.store.delete("Pod", ds["metadata"]["namespace"], pod_name)
        except ApiError as exc:
            if exc.code != 404:
                raise
            return
        self.ctx.store.record_event(ds, "SuccessfulDelete", f"Deleted pod: {pod_name}")

    def _sync_status(self, ds: Obj, pods: list[Obj], update_hash: str) -> float | None:
        min_ready = int(ds["spec"].get("minReadySeconds") or 0)
        ready, available, wake = count_available(pods, min_ready)
        desired = 1
        status: Obj = {
            "observedGeneration": ds["metadata"].get("generation", 1),
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": min(len(pods), desired),
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": available,
            "numberUnavailable": max(0, desired - available),
            "updatedNumberScheduled": sum(1 for p in pods if _hash_of(p) == update_hash),
        }
        old = ds.get("status") or {}
        if any(old.get(k) != v for k, v in status.items()):
            def put(obj: Obj) -> None:
                obj["status"] = {**(obj.get("status") or {}), **status}

            self.ctx.store.mutate("DaemonSet", ds["metadata"]["namespace"],
                                  ds["metadata"]["name"], put, subresource="status")
        return None if wake is None else wake + 0.05
