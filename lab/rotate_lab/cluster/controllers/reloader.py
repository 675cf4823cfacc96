"""Reloader (stakater), annotations strategy — started only with ``rotate lab up --reloader``.

It exists in the lab to show the hazard ``rotate`` guards against: Reloader rolls the
*provider* the moment its Secret changes, before the consumers have the new value, and a
second roll by ``rotate`` on top of it would be wasted.

Rules (as the real Reloader with ``--reload-strategy=annotations``):

- A Deployment or StatefulSet is a target of Secret ``S`` (same namespace) if its metadata
  (or pod template) carries ``secret.reloader.stakater.com/reload`` listing ``S``, or
  ``reloader.stakater.com/auto: "true"`` / ``secret.reloader.stakater.com/auto: "true"``
  and a container references ``S`` (``env[].valueFrom.secretKeyRef``, ``envFrom[].secretRef``)
  or a volume mounts it (``secret.secretName``, projected ``secret.name``).
- Only an *update* whose data hash differs rolls targets (a Secret being created does not —
  Reloader's default ``--reload-on-create=false``).
- A roll sets ``spec.template.metadata.annotations["reloader.stakater.com/last-reloaded-from"]``
  to ``{"type": "SECRET", "name", "namespace", "hash", "containerRefs", "observedAt"}``.  The
  hash is a SHA-1 over the Secret's data — never the data — and a target already carrying
  that hash is not rolled again, so one change rolls each target exactly once.

Where it shows in the API, as a real Reloader does (``rotate`` looks for these before it
waits — rotate/stages/reloader_presence.py):

- a Deployment ``reloader/reloader`` labelled ``app.kubernetes.io/name: reloader`` with image
  ``ghcr.io/stakater/reloader``, one replica.  The reconcile loop runs here, in the cluster
  process; the kubelet maps that image to a stand-in process (``sleep``), so the Deployment
  becomes available the ordinary way and goes unavailable if its pod dies.
- the leader-election Lease ``reloader/stakater-reloader-lock`` (Reloader's ``LockName``,
  as with ``enableHA``), renewed every ``LEASE_RENEW`` seconds while the controller runs.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.controllers.base import Controller, Key, key_of

Obj = dict[str, Any]

LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
AUTO = "reloader.stakater.com/auto"
SECRET_AUTO = "secret.reloader.stakater.com/auto"
SECRET_RELOAD = "secret.reloader.stakater.com/reload"
WORKLOAD_KINDS = ("Deployment", "StatefulSet")

NAMESPACE = "reloader"
IMAGE = "ghcr.io/stakater/reloader:v1.4.0"
LEASE = "stakater-reloader-lock"
LEASE_DURATION = 15
LEASE_RENEW = 5.0


def deployment_manifest() -> Obj:
    """Reloader's Deployment as its Helm chart would make it (labels, image, one replica)."""
    labels = {"app": "reloader", "app.kubernetes.io/name": "reloader"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "reloader", "namespace": NAMESPACE, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "reloader"}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "reloader", "image": IMAGE,
                                                       "args": ["--reload-strategy=annotations",
                                                                "--enable-ha=true"]}]}}},
    }


def _micro_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + \
        f".{int(time.time() * 1e6) % 1_000_000:06d}Z"


def data_hash(secret: Obj) -> str:
    """SHA-1 over the sorted ``key=value`` pairs of the Secret's data (Reloader's scheme)."""
    pairs = sorted(f"{k}={v}" for k, v in (secret.get("data") or {}).items())
    return hashlib.sha1("\n".join(pairs).encode(), usedforsecurity=False).hexdigest()


def _annotations(workload: Obj) -> dict[str, str]:
    meta = (workload.get("metadata") or {}).get("annotations") or {}
    tmpl = (((workload.get("spec") or {}).get("template") or {}).get("metadata") or {}) \
        .get("annotations") or {}
    return {**tmpl, **meta}


def _pod_spec(workload: Obj) -> Obj:
    return ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}


def container_refs(workload: Obj, secret: str) -> list[str]:
    """Names of the containers that read ``secret`` (env, envFrom, or a mounted volume)."""
    spec = _pod_spec(workload)
    volumes = set()
    for vol in spec.get("volumes") or []:
        if (vol.get("secret") or {}).get("secretName") == secret:
            volumes.add(vol.get("name"))
        for src in (vol.get("projected") or {}).get("sources") or []:
            if (src.get("secret") or {}).get("name") == secret:
                volumes.add(vol.get("name"))
    out = []
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        env = any(((e.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") == secret
                  for e in c.get("env") or [])
        env_from = any((e.get("secretRef") or {}).get("name") == secret
                       for e in c.get("envFrom") or [])
        mounted = any(m.get("name") in volumes for m in c.get("volumeMounts") or [])
        if env or env_from or mounted:
            out.append(str(c.get("name")))
    return out


def targets(workload: Obj, secret: str) -> list[str] | None:
    """The container refs if ``workload`` must roll when ``secret`` changes, else None."""
    ann = _annotations(workload)
    refs = container_refs(workload, secret)
    named = [s.strip() for s in str(ann.get(SECRET_RELOAD, "")).split(",") if s.strip()]
    if secret in named:
        return refs
    if "true" in (str(ann.get(AUTO, "")).lower(), str(ann.get(SECRET_AUTO, "")).lower()):
        return refs or None
    return None


def reloaded_hash(workload: Obj) -> str | None:
    raw = _annotations(workload).get(LAST_RELOADED_FROM)
    try:
        return str(json.loads(raw)["hash"]) if raw else None
    except (ValueError, KeyError, TypeError):
        return None


class ReloaderController(Controller):
    name = "reloader"
    kinds = ("Secret",)
    resync_period = 30.0

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        #: last data hash seen per Secret — the "old object" the store's events do not carry
        self._seen: dict[Key, str] = {}
        #: Secret → monotonic time a detected change may roll (profile latency)
        self._roll_at: dict[Key, float] = {}

    def start(self) -> None:
        # Existing Secrets are the baseline: starting Reloader rolls nothing.
        items, _ = self.ctx.store.list("Secret")
        for s in items:
            self._seen[key_of("Secret", s)] = data_hash(s)
        self._deploy()
        self._renew()
        self._lease_thread = threading.Thread(target=self._renew_loop, name="lab-reloader-lease",
                                              daemon=True)
        self._lease_thread.start()
        super().start()

    def _deploy(self) -> None:
        """Namespace and Deployment ``reloader/reloader`` (load_manifests replaces if present)."""
        self.ctx.store.load_manifests([
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            deployment_manifest()])

    def _renew(self) -> None:
        """Create or renew the leader Lease (this controller is the only replica: it leads)."""
        now = _micro_now()
        try:
            self.ctx.store.get("Lease", NAMESPACE, LEASE)
        except ApiError as exc:
            if exc.code != 404:
                raise
            self.ctx.store.create("Lease", {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": LEASE, "namespace": NAMESPACE},
                "spec": {"holderIdentity": "reloader-0", "leaseDurationSeconds": LEASE_DURATION,
                         "acquireTime": now, "renewTime": now, "leaseTransitions": 0}})
            return

        def renew(obj: Obj) -> None:
            obj.setdefault("spec", {})["renewTime"] = now

        self.ctx.store.mutate("Lease", NAMESPACE, LEASE, renew)

    def _renew_loop(self) -> None:
        while not self.stopped and not self.ctx.stop.wait(LEASE_RENEW):
            if self.stopped:
                return
            try:
                self._renew()
            except Exception:  # a failed renewal is retried on the next tick
                self.log.exception("reloader: lease renewal failed")

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        try:
            secret = self.ctx.store.get("Secret", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                self._seen.pop(key, None)
                self._roll_at.pop(key, None)
                return None
            raise
        new = data_hash(secret)
        old = self._seen.get(key)
        if old is None or old == new:
            self._seen[key] = new  # created, or a change that left the data alone
            return None
        latency = self.ctx.profile.reloader_latency
        if latency > 0:
            at = self._roll_at.setdefault(key, time.monotonic() + latency)
            if time.monotonic() < at:
                return at - time.monotonic()
        self._roll_at.pop(key, None)
        for kind in WORKLOAD_KINDS:
            items, _ = self.ctx.store.list(kind, ns)
            for wl in items:
                refs = targets(wl, name)
                if refs is not None and reloaded_hash(wl) != new:
                    self._roll(kind, wl, secret, new, refs)
        self._seen[key] = new
        return None

    def _roll(self, kind: str, wl: Obj, secret: Obj, digest: str, refs: list[str]) -> None:
        md = secret["metadata"]
        source = json.dumps({"type": "SECRET", "name": md["name"], "namespace": md["namespace"],
                             "hash": digest, "containerRefs": refs,
                             "observedAt": int(time.time())}, separators=(",", ":"))

        def apply(obj: Obj) -> None:
            tmpl = obj.setdefault("spec", {}).setdefault("template", {})
            tmpl.setdefault("metadata", {}).setdefault("annotations", {})[
                LAST_RELOADED_FROM] = source

        wmd = wl["metadata"]
        after = self.ctx.store.mutate(kind, wmd["namespace"], wmd["name"], apply)
        self.log.info("reloader: rolled %s %s/%s after Secret %s changed", kind,
                      wmd["namespace"], wmd["name"], md["name"])
        self.ctx.store.record_event(
            after, "Reloaded",
            f"Changes detected in '{md['name']}' of type 'SECRET' in namespace "
            f"'{md['namespace']}'; updated '{wmd['name']}' of type '{kind}' in namespace "
            f"'{wmd['namespace']}'")
