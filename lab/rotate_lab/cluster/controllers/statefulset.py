"""StatefulSet controller: stable pods ``NAME-0 .. NAME-(n-1)``, rolled as Kubernetes does.

- Revisions: each pod template is a ControllerRevision ``NAME-<hash>`` (``revision`` grows
  per new template; a template that comes back gets the next number), and every pod carries
  the revision it was made from in the ``controller-revision-hash`` label.  That is what
  ``status.currentRevision``/``updateRevision``/``updatedReplicas`` and ``kubectl rollout
  history statefulset`` are computed from.
- ``podManagementPolicy: OrderedReady`` (default): pods are created in ordinal order, each
  only once every lower one is Running and Ready; ``Parallel`` creates them all at once.
  Scale-down removes the highest ordinal first.
- ``updateStrategy: RollingUpdate``: once every pod is Ready, the highest-ordinal pod
  (>= ``partition``) that is not at the update revision is deleted and recreated from the new
  template; the next one only after it is Ready again — one at a time, top down.
- ``volumeClaimTemplates``: pod ``NAME-i`` gets the volume ``<template>`` backed by the
  claim ``<template>-NAME-i`` (no PVC object is stored; the kubelet maps the claim to a
  directory that outlives the pod).
- ``updateStrategy: OnDelete``: a template change rolls nothing; a pod someone deletes is
  recreated from the *update* revision.  ``currentRevision`` only advances under
  RollingUpdate (upstream behaviour, which is why kubectl refuses ``rollout status`` here).
"""

from __future__ import annotations

import copy
import re
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
    pod_is_ready,
)

Obj = dict[str, Any]

REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def _rev(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL, ""))


def _running_and_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and pod_is_ready(pod)


class StatefulSetController(OwnerController):
    name = "statefulset"
    kinds = ("StatefulSet", "Pod")

    # -- revisions ------------------------------------------------------------------------

    def _revisions(self, sts: Obj) -> list[Obj]:
        return self.owned("ControllerRevision", sts)

    def _ensure_revision(self, sts: Obj, revisions: list[Obj]) -> tuple[str, dict[str, Obj]]:
        """The update revision's name, and every revision's template by name."""
        template = copy.deepcopy(sts["spec"].get("template") or {})
        name = f"{sts['metadata']['name']}-{template_hash(template)}"
        templates = {r["metadata"]["name"]: (r.get("data") or {}).get("spec", {}).get(
            "template", {}) for r in revisions}
        top = max((int(r.get("revision", 0)) for r in revisions), default=0)
        existing = next((r for r in revisions if r["metadata"]["name"] == name), None)
        if existing is None:
            self.ctx.store.create("ControllerRevision", {
                "apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": name, "namespace": sts["metadata"]["namespace"],
                             "labels": {**((template.get("metadata") or {}).get("labels") or {}),
                                        REVISION_LABEL: name},
                             "ownerReferences": [owner_reference(sts)]},
                "data": {"spec": {"template": {**template, "$patch": "replace"}}},
                "revision": top + 1,
            })
        elif int(existing.get("revision", 0)) < top:
            self.ctx.store.mutate("ControllerRevision", sts["metadata"]["namespace"], name,
                                  lambda o: o.__setitem__("revision", top + 1))
        templates[name] = template
        return name, templates

    # -- reconcile ------------------------------------------------------------------------

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        store = self.ctx.store
        try:
            sts = store.get("StatefulSet", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                return None  # pods and revisions go with it (store cascade)
            raise
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        update_rev, templates = self._ensure_revision(sts, self._revisions(sts))
        current_rev = str((sts.get("status") or {}).get("currentRevision") or update_rev)

        self._manage(sts, self._pods(sts), replicas, monotonic, rolling, partition,
                     update_rev, current_rev, templates)
        return self._sync_status(sts, self._pods(sts), rolling, update_rev, current_rev)

    def _pods(self, sts: Obj) -> dict[int, Obj]:
        """Its active pods by ordinal (``NAME-N``)."""
        pattern = re.compile(rf"^{re.escape(sts['metadata']['name'])}-(\d+)$")
        return {int(m.group(1)): p for p in self.owned("Pod", sts)
                if (m := pattern.match(p["metadata"]["name"])) and pod_is_active(p)}

    def _manage(self, sts: Obj, pods: dict[int, Obj], replicas: int, monotonic: bool,
                rolling: bool, partition: int, update_rev: str, current_rev: str,
                templates: dict[str, Obj]) -> None:
        store = self.ctx.store
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        # 1. create missing pods in ordinal order; OrderedReady waits on each one.
        for i in range(replicas):
            pod = pods.get(i)
            if pod is None:
                rev = update_rev
                if rolling and i < partition and current_rev in templates:
                    rev = current_rev
                store.create("Pod", self._pod(sts, i, rev, templates[rev]))
                if monotonic:
                    return
                continue
            if monotonic and not _running_and_ready(pod):
                return
        # 2. scale down from the highest ordinal.
        surplus = sorted((i for i in pods if i >= replicas), reverse=True)
        for i in surplus:
            store.delete("Pod", ns, pods[i]["metadata"]["name"])
            if monotonic:
                return
        if surplus:
            return
        # 3. rolling update, top down, one pod at a time.
        if not rolling:
            return
        for i in range(replicas - 1, partition - 1, -1):
            pod = pods.get(i)
            if pod is None:
                return
            if _rev(pod) != update_rev:
                store.record_event(sts, "SuccessfulDelete",
                                   f"delete Pod {pod['metadata']['name']} in StatefulSet "
                                   f"{name} successful")
                store.delete("Pod", ns, pod["metadata"]["name"])
                return
            if not _running_and_ready(pod):
                return

    def _pod(self, sts: Obj, ordinal: int, rev: str, template: Obj) -> Obj:
        name = f"{sts['metadata']['name']}-{ordinal}"
        clean = {k: v for k, v in template.items() if k != "$patch"}
        pod = pod_from_template(sts, clean, name=name, extra_labels={
            REVISION_LABEL: rev, POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)})
        pod["spec"]["hostname"] = name
        # As upstream: each volumeClaimTemplate becomes the pod's volume backed by the claim
        # <template>-<pod> (the kubelet keeps its data across the pod's recreations).
        claims = [{"name": t["metadata"]["name"], "persistentVolumeClaim": {
            "claimName": f"{t['metadata']['name']}-{name}"}}
            for t in sts["spec"].get("volumeClaimTemplates") or []
            if (t.get("metadata") or {}).get("name")]
        if claims:
            pod["spec"]["volumes"] = [*(pod["spec"].get("volumes") or []), *claims]
        if sts["spec"].get("serviceName"):
            pod["spec"]["subdomain"] = sts["spec"]["serviceName"]
        self.ctx.store.record_event(sts, "SuccessfulCreate",
                                    f"create Pod {name} in StatefulSet "
                                    f"{sts['metadata']['name']} successful")
        return pod

    def _sync_status(self, sts: Obj, pods: dict[int, Obj], rolling: bool, update_rev: str,
                     current_rev: str) -> float | None:
        min_ready = int(sts["spec"].get("minReadySeconds") or 0)
        ready, available, wake = count_available(pods.values(), min_ready)
        status: Obj = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": available,
            "currentReplicas": sum(1 for p in pods.values() if _rev(p) == current_rev),
            "updatedReplicas": sum(1 for p in pods.values() if _rev(p) == update_rev),
            "currentRevision": current_rev,
            "updateRevision": update_rev,
            "collisionCount": 0,
        }
        if rolling and status["updatedReplicas"] == status["replicas"] == ready:
            status["currentRevision"] = update_rev
            status["currentReplicas"] = status["updatedReplicas"]
        old = sts.get("status") or {}
        if any(old.get(k) != v for k, v in status.items()):
            def put(obj: Obj) -> None:
                obj["status"] = {**(obj.get("status") or {}), **status}

            self.ctx.store.mutate("StatefulSet", sts["metadata"]["namespace"],
                                  sts["metadata"]["name"], put, subresource="status")
        return None if wake is None else wake + 0.05
