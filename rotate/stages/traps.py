"""Field hazards preflight must catch — pure functions from observed objects to Traps.

Each trap is a failure seen in real clusters where every individual tool "worked":
force-sync ignored by a CreatedOnce ExternalSecret, a restart patch that never rolls a
paused Deployment, an operator reverting our patch, a second reloader rolling the provider
on its own schedule, a consumer "rolled out" without a readiness probe.  Blocking traps
stop the run in preflight (exit 3) with what to change; the others are named in the plan
with what ``rotate`` will do about them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rotate.core.durations import format_duration, parse_duration
from rotate.core.findings import Trap
from rotate.core.refs import ObjectRef
from rotate.stages.rollout import ONDELETE_ACTION, reloader_watches, update_strategy


def external_secret_traps(es: Mapping[str, Any], ref: ObjectRef) -> list[Trap]:
    spec = es.get("spec") or {}
    policy = str(spec.get("refreshPolicy") or "")
    interval = spec.get("refreshInterval")
    traps: list[Trap] = []
    if policy == "CreatedOnce":
        traps.append(Trap(
            "refresh-created-once", str(ref),
            "refreshPolicy CreatedOnce: ESO never syncs again, force-sync is ignored",
            "refuse; set refreshPolicy to Periodic or OnChange", True))
    elif policy in ("", "Periodic") and interval is not None:
        try:
            seconds = parse_duration(
                interval if isinstance(interval, int | float) else str(interval))
        except ValueError:
            seconds = -1.0
        if seconds == 0:
            traps.append(Trap(
                "refresh-interval-zero", str(ref),
                "refreshInterval 0 under the Periodic policy: ESO never refreshes, "
                "force-sync is ignored",
                "refuse; set a non-zero refreshInterval", True))
    return traps


def workload_traps(
    obj: Mapping[str, Any], ref: ObjectRef, *, role: str, secret_name: str, grace: float,
    rolled_by: str | None = None, rolled: bool = False,
) -> list[Trap]:
    """``role`` is "provider" or "consumer"; ``secret_name`` the credential's target Secret;
    ``rolled_by`` another reloader found outside the object (Vault Secrets Operator);
    ``rolled``: the provider takes the new value by a rollout (``apply: rollout``)."""
    traps: list[Trap] = []
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    target = str(ref)
    if role == "provider" and rolled and init_only(obj):
        traps.append(Trap("init-only-rollout", target,
                          f"annotated {INIT_ONLY}: it reads the credential only when it is "
                          "initialised, so a rollout would change nothing",
                          "refuse; change it live instead: apply: job (a rotator Job, "
                          "docs/providers.md) or the provider's own method (redis-acl, "
                          "postgres)", True))
    if ref.kind == "Deployment" and spec.get("paused"):
        traps.append(Trap("paused-deployment", target,
                          "the Deployment is paused: a restart patch never rolls it",
                          "refuse; unpause it or remove spec.paused", True))
    if ref.kind in ONDELETE_ACTION and update_strategy(obj) == "OnDelete":
        traps.append(Trap(f"{ref.kind.lower()}-ondelete", target,
                          "updateStrategy OnDelete: a template patch rolls nothing",
                          ONDELETE_ACTION[ref.kind], False))
    owners = meta.get("ownerReferences") or []
    if owners:
        owner = owners[0]
        traps.append(Trap("operator-owned", target,
                          f"owned by {owner.get('kind')}/{owner.get('name')}: "
                          "the operator will revert the restart patch",
                          "refuse; rotate through the operator instead", True))
    other = reloader_watches(obj, secret_name) or rolled_by
    if other is not None:
        if role == "provider":
            traps.append(Trap(
                "other-reloader", target,
                f"{other} rolls this workload when the Secret changes",
                f"if it runs, watch up to {format_duration(grace)} for its rollout (pods started "
                "after the Secret changed), roll only if it does not come",
                False))
        else:
            traps.append(Trap(
                "other-reloader", target,
                f"{other} will roll this consumer as soon as the Secret changes, before its "
                "Config Center document holds the new value",
                "refuse; remove the annotation from the consumer", True))
    if role == "consumer" and not _has_readiness_probe(obj):
        traps.append(Trap("no-readiness-probe", target,
                          "no readinessProbe: rollout done would mean nothing",
                          "refuse; add a readinessProbe", True))
    return traps


#: the workload annotation that declares a provider init-only (docs/providers.md)
INIT_ONLY = "rotate.dev/init-only"


def init_only(obj: Mapping[str, Any]) -> bool:
    """Whether the workload declares that it reads the credential only at initialisation
    (its first start on an empty volume: PostgreSQL's initdb, Bugsink's first superuser)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(INIT_ONLY, "")).strip().lower() == "true"


def _has_readiness_probe(obj: Mapping[str, Any]) -> bool:
    pod_spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = pod_spec.get("containers") or []
    return any(c.get("readinessProbe") for c in containers)
