"""The ExternalSecret controller (external-secrets.io/v1), with real ESO's refresh rules.

When to sync — copied from ESO's ``shouldRefresh``/``isSecretValid``, traps included:

- ``status.syncedResourceVersion`` is ``"<generation>-<hash of labels+annotations>"``.  Any
  annotation change (the ``force-sync`` idiom) or spec change makes it differ.
- ``Periodic`` (default): with ``refreshInterval`` 0 and a previous sync, *never* refresh —
  not even on a spec or annotation change (the interval test comes first in ESO).  Else
  refresh when the version token differs or ``refreshTime + refreshInterval`` has passed.
- ``OnChange``: refresh only when the version token differs.
- ``CreatedOnce``: refresh only if never synced.
- Whatever the policy, a missing or tampered target Secret (no managed label, data hash
  annotation not matching its data) is re-synced — that is ESO's ``isSecretValid`` gate.

What a sync writes: the target Secret (``ownerReferences`` to the ExternalSecret for
``creationPolicy: Owner``, label ``reconcile.external-secrets.io/managed``, the data-hash
annotation), updated only when something changed; then status ``Ready``/``SecretSynced``,
``refreshTime`` (the reconcile's start, **second precision** as ``metav1.Time`` — so a
caller comparing it with its own trigger time must truncate that to the second),
``syncedResourceVersion`` and ``binding.name``.  A provider error sets Ready=False /
``SecretSyncedError`` with a message free of values, records an ``UpdateFailed`` Warning
event and keeps the old Secret.

Lab faults: ``eso-stall`` freezes the controller (no write at all; ``eso-stall NS/NAME``
that ExternalSecret only) and ``eso-error`` fails
every sync with "lab fault: provider error"; both are re-checked every 0.5 s so clearing
them takes effect at once.  ``ctx.profile.eso_latency`` delays every sync it decides on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from datetime import UTC, datetime
from typing import Any

from rotate_lab.cluster.api.store import ApiError
from rotate_lab.cluster.controllers.base import Controller, Key
from rotate_lab.cluster.controllers.eso_duration import DurationError, refresh_seconds
from rotate_lab.cluster.controllers.eso_vault import (
    ProviderError,
    VaultReader,
    VaultStore,
    token_from_secret,
)

Obj = dict[str, Any]

API_VERSION = "external-secrets.io/v1"
MANAGED_LABEL = "reconcile.external-secrets.io/managed"
DATA_HASH = "reconcile.external-secrets.io/data-hash"
DEFAULT_REFRESH = "1h"
FAULT_RECHECK = 0.5
ERROR_RETRY = 1.0
FAULT_MESSAGE = "lab fault: provider error"


def _hash(value: Any) -> str:
    return hashlib.md5(json.dumps(value, sort_keys=True).encode(), usedforsecurity=False) \
        .hexdigest()


def resource_version_token(es: Obj) -> str:
    """ESO's ``getResourceVersion``: generation plus a hash of labels and annotations."""
    md = es.get("metadata") or {}
    return f"{md.get('generation', 1)}-" + _hash(
        {"annotations": md.get("annotations") or {}, "labels": md.get("labels") or {}})


def refresh_interval(es: Obj) -> float:
    """Seconds between refreshes: ``spec.refreshInterval`` read as ESO reads it (Go's
    ``time.ParseDuration``: :mod:`.eso_duration`); absent or empty, ESO's default (1h).  A
    value ESO could not decode falls back to the default here: the lab keeps syncing where
    the real controller would fail to read the object."""
    raw = (es.get("spec") or {}).get("refreshInterval")
    try:
        return refresh_seconds(DEFAULT_REFRESH if raw in (None, "") else raw)
    except DurationError:
        return refresh_seconds(DEFAULT_REFRESH)


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def should_refresh(es: Obj, now: float) -> bool:
    status = es.get("status") or {}
    synced = str(status.get("syncedResourceVersion") or "")
    refreshed = _parse_time(status.get("refreshTime"))
    never = not synced or refreshed is None
    policy = (es.get("spec") or {}).get("refreshPolicy") or "Periodic"
    if policy == "CreatedOnce":
        return never
    if policy == "OnChange":
        return never or synced != resource_version_token(es)
    interval = refresh_interval(es)
    if interval <= 0 and synced:
        return False
    if synced != resource_version_token(es) or refreshed is None:
        return True
    return refreshed + interval <= now


def secret_valid(secret: Obj | None, es: Obj) -> bool:
    """ESO's isSecretValid: exists, carries our label, and its data matches our hash."""
    if secret is None:
        return False
    md = secret.get("metadata") or {}
    policy = ((es.get("spec") or {}).get("target") or {}).get("creationPolicy") or "Owner"
    if policy == "Owner" and (md.get("labels") or {}).get(MANAGED_LABEL) != "true":
        return False
    return (md.get("annotations") or {}).get(DATA_HASH) == _hash(secret.get("data") or {})


def _ready(es: Obj) -> Obj:
    conds = (es.get("status") or {}).get("conditions") or []
    return next((dict(c) for c in conds if c.get("type") == "Ready"), {})


def _target_name(es: Obj) -> str:
    return str(((es.get("spec") or {}).get("target") or {}).get("name")
               or es["metadata"]["name"])


def _now_rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ExternalSecretController(Controller):
    name = "eso"
    kinds = ("ExternalSecret", "Secret", "SecretStore", "ClusterSecretStore")
    resync_period = 10.0

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        #: key → monotonic time at which a sync decided on may run (profile latency)
        self._sync_at: dict[Key, float] = {}

    # -- which ExternalSecrets a change concerns ---------------------------------------

    def keys_for(self, event_type: str, kind: str, obj: Obj) -> list[Key]:
        md = obj.get("metadata") or {}
        ns, name = str(md.get("namespace") or ""), str(md.get("name") or "")
        if kind == "ExternalSecret":
            return [("ExternalSecret", ns, name)]
        if kind == "Secret":
            items, _ = self.ctx.store.list("ExternalSecret", ns)
            return [("ExternalSecret", ns, es["metadata"]["name"]) for es in items
                    if _target_name(es) == name]
        items, _ = self.ctx.store.list("ExternalSecret", ns if kind == "SecretStore" else None)
        out = []
        for es in items:
            ref = (es.get("spec") or {}).get("secretStoreRef") or {}
            if ref.get("name") == name and (ref.get("kind") or "SecretStore") == kind:
                out.append(("ExternalSecret", es["metadata"]["namespace"], es["metadata"]["name"]))
        return out

    def resync_keys(self) -> list[Key]:
        return self.stored_keys("ExternalSecret")

    # -- reconcile ---------------------------------------------------------------------

    def reconcile(self, key: Key) -> float | None:
        _, ns, name = key
        faults = self.ctx.faults
        if faults.active("eso-stall", f"{ns}/{name}"):
            return FAULT_RECHECK
        try:
            es = self.ctx.store.get("ExternalSecret", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                self._sync_at.pop(key, None)
                return None
            raise
        if (es.get("metadata") or {}).get("deletionTimestamp"):
            return None
        existing = self._get_secret(ns, _target_name(es))
        now = time.time()
        due = should_refresh(es, now) or not secret_valid(existing, es)
        if faults.active("eso-error"):
            # Shown at once, not only at the next due sync, so the fault is visible in
            # `kubectl get es` as soon as it is switched on.
            self._mark_failed(es, FAULT_MESSAGE, FAULT_MESSAGE)
            return FAULT_RECHECK
        if not due:
            self._sync_at.pop(key, None)
            if _ready(es).get("message") == FAULT_MESSAGE:
                # The lab fault is cleared and nothing was due: put back the condition the
                # fault replaced, without a sync ESO would not have made (refreshInterval
                # 0 and CreatedOnce keep their trap).
                self._set_status(es, True, "SecretSynced", "secret synced", {})
            return self._next_refresh(es, now)
        latency = self.ctx.profile.eso_latency
        if latency > 0:
            at = self._sync_at.setdefault(key, time.monotonic() + latency)
            if time.monotonic() < at:
                return at - time.monotonic()
        self._sync_at.pop(key, None)
        started = time.time()
        try:
            data = self._fetch(es)
        except ProviderError as exc:
            self._mark_failed(es, f"could not get secret data from provider: {exc}", str(exc))
            return ERROR_RETRY
        try:
            self._write_secret(es, existing, data)
        except ApiError as exc:
            if exc.code == 409:
                raise  # a concurrent writer: the base loop retries at once
            self._mark_failed(es, "could not update Secret", f"could not update Secret: "
                              f"{exc.reason}")
            return ERROR_RETRY
        self._mark_done(es, started)
        return self._next_refresh(es, time.time())

    def _next_refresh(self, es: Obj, now: float) -> float | None:
        spec = es.get("spec") or {}
        interval = refresh_interval(es)
        if (spec.get("refreshPolicy") or "Periodic") != "Periodic" or interval <= 0:
            return None
        refreshed = _parse_time((es.get("status") or {}).get("refreshTime")) or now
        return max(0.05, refreshed + interval - now)

    def _get_secret(self, ns: str, name: str) -> Obj | None:
        try:
            return self.ctx.store.get("Secret", ns, name)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    # -- provider ----------------------------------------------------------------------

    def _store_for(self, es: Obj) -> Obj:
        ref = (es.get("spec") or {}).get("secretStoreRef") or {}
        kind = ref.get("kind") or "SecretStore"
        ns = es["metadata"]["namespace"] if kind == "SecretStore" else None
        try:
            return self.ctx.store.get(kind, ns, str(ref.get("name") or ""))
        except ApiError as exc:
            if exc.code == 404:
                raise ProviderError(f'could not get store: {kind} "{ref.get("name")}" not '
                                    "found") from None
            raise

    def _fetch(self, es: Obj) -> dict[str, bytes]:
        ns = es["metadata"]["namespace"]
        vault = VaultStore.from_store(self._store_for(es), ns)
        tns, tname, tkey = vault.token_secret
        token_secret = self._get_secret(tns, tname)
        if token_secret is None:
            raise ProviderError(f'cannot get Kubernetes secret "{tname}": not found')
        endpoints = getattr(self.ctx, "endpoints", {}) or {}
        reader = VaultReader.connect(vault, token_from_secret(token_secret, tkey),
                                     self.ctx.resolver.resolve, endpoints.get("openbao"))
        spec = es.get("spec") or {}
        out: dict[str, bytes] = {}
        for item in spec.get("dataFrom") or []:
            extract = (item or {}).get("extract") or {}
            if not extract.get("key"):
                raise ProviderError("only dataFrom.extract is supported by the lab")
            version = str(extract["version"]) if extract.get("version") else None
            for k, v in reader.read(str(extract["key"]), version).items():
                out[str(k)] = v.encode() if isinstance(v, str) else json.dumps(v).encode()
        for item in spec.get("data") or []:
            ref = item.get("remoteRef") or {}
            version = str(ref["version"]) if ref.get("version") else None
            out[str(item["secretKey"])] = reader.value(str(ref.get("key") or ""),
                                                       ref.get("property"), version)
        return out

    # -- writes ------------------------------------------------------------------------

    def _write_secret(self, es: Obj, existing: Obj | None, data: dict[str, bytes]) -> None:
        target = (es.get("spec") or {}).get("target") or {}
        policy = target.get("creationPolicy") or "Owner"
        if policy == "None":
            return
        md = es["metadata"]
        ns, name = md["namespace"], _target_name(es)
        encoded = {k: base64.b64encode(v).decode() for k, v in sorted(data.items())}
        owner = {"apiVersion": API_VERSION, "kind": "ExternalSecret", "name": md["name"],
                 "uid": md.get("uid"), "controller": True, "blockOwnerDeletion": True}

        def apply(secret: Obj) -> None:
            smd = secret.setdefault("metadata", {})
            merged = {**(secret.get("data") or {}), **encoded} if policy == "Merge" else encoded
            secret["data"] = merged
            secret.setdefault("type", "Opaque")
            smd.setdefault("annotations", {})[DATA_HASH] = _hash(merged)
            if policy == "Owner":
                smd.setdefault("labels", {})[MANAGED_LABEL] = "true"
                refs = [r for r in smd.get("ownerReferences") or []
                        if r.get("uid") != owner["uid"]]
                smd["ownerReferences"] = [*refs, owner]

        if existing is None:
            if policy == "Merge":
                raise ProviderError(f"the desired secret {name} was not found. With "
                                    "creationPolicy=Merge the secret won't be created")
            secret: Obj = {"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": name, "namespace": ns}}
            apply(secret)
            self.ctx.store.create("Secret", secret)
            self.ctx.store.record_event(es, "Created", "Created Secret")
            return
        before = existing.get("data") or {}
        after = self.ctx.store.mutate("Secret", ns, name, apply)
        if (after.get("data") or {}) != before:
            self.ctx.store.record_event(es, "Updated", "Updated Secret")

    def _set_status(self, es: Obj, ready: bool, reason: str, message: str,
                    extra: Obj) -> bool:
        """Write the Ready condition (+ ``extra``); True if the condition changed."""
        stamp = _now_rfc3339(time.time())

        def fn(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
            old = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"),
                       None)
            value = "True" if ready else "False"
            same = old is not None and (old.get("status"), old.get("reason"),
                                        old.get("message")) == (value, reason, message)
            cond = old if same and old is not None else {
                "type": "Ready", "status": value, "reason": reason, "message": message,
                "lastTransitionTime": stamp}
            if old is not None and old.get("status") == value and not same:
                cond["lastTransitionTime"] = old.get("lastTransitionTime") or stamp
            status["conditions"] = [*conds, cond]
            status.update(extra)

        before = _ready(es)
        after = self.ctx.store.mutate("ExternalSecret", es["metadata"]["namespace"],
                                      es["metadata"]["name"], fn, subresource="status")
        return _ready(after) != before

    def _mark_done(self, es: Obj, started: float) -> None:
        self._set_status(es, True, "SecretSynced", "secret synced", {
            "refreshTime": _now_rfc3339(started),
            "syncedResourceVersion": resource_version_token(es),
            "binding": {"name": _target_name(es)},
        })

    def _mark_failed(self, es: Obj, message: str, event_message: str) -> None:
        if self._set_status(es, False, "SecretSyncedError", message, {}):
            # Once per transition: a fault re-checked every 0.5 s must not flood Events.
            self.ctx.store.record_event(es, "UpdateFailed", event_message, type="Warning")
