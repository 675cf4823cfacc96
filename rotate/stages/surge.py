"""Can a consumer's rollout be started before the provider switches (chain.md "Order")?

A rotation with the restart strategy starts the new consumer pods *before* the provider takes
the new value.  Those pods cannot become Ready until it does, so this is only harmless when
the workload keeps old pods serving while new ones are unready: a Deployment's RollingUpdate
keeps at least ``replicas - maxUnavailable`` available pods, and creates up to ``maxSurge``
extra ones.  Pure functions on the workload object, rounded as the Deployment controller
rounds (maxSurge up, maxUnavailable down, both 0 → maxUnavailable 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SurgeVerdict:
    """``early``: the rollout may be prepared; ``note``: what it costs, or why it waits."""

    early: bool
    note: str = ""


def _count(value: Any, default: str, replicas: int, round_up: bool) -> int:
    v = default if value is None else value
    if isinstance(v, str) and v.endswith("%"):
        frac = replicas * int(v[:-1]) / 100
        return math.ceil(frac) if round_up else math.floor(frac)
    return int(v)


def fenceposts(obj: Mapping[str, Any]) -> tuple[int, int, int]:
    """(replicas, maxSurge, maxUnavailable) of a Deployment, as pod counts."""
    spec = obj.get("spec") or {}
    replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = _count(ru.get("maxSurge"), "25%", replicas, True)
    unavailable = _count(ru.get("maxUnavailable"), "25%", replicas, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return replicas, surge, unavailable


def verdict(obj: Mapping[str, Any]) -> SurgeVerdict:
    """Whether the workload keeps serving while its new pods wait for the provider."""
    kind = str(obj.get("kind") or "")
    spec = obj.get("spec") or {}
    if kind != "Deployment":
        how = str((spec.get("updateStrategy") or {}).get("type") or "RollingUpdate")
        return SurgeVerdict(False, f"a {kind} ({how}) replaces a pod before its successor is "
                                   "Ready: restarted after the provider switches")
    if str((spec.get("strategy") or {}).get("type") or "RollingUpdate") == "Recreate":
        return SurgeVerdict(False, "strategy Recreate stops every old pod first: restarted "
                                   "after the provider switches (down for a pod start)")
    replicas, _, unavailable = fenceposts(obj)
    if replicas == 0:
        return SurgeVerdict(True)
    keep = replicas - unavailable
    if keep <= 0:
        return SurgeVerdict(False, f"maxUnavailable {unavailable} of {replicas} replica(s) "
                                   "leaves no old pod serving: restarted after the provider "
                                   "switches")
    if unavailable > 0:
        return SurgeVerdict(True, f"maxUnavailable {unavailable}: {keep} of {replicas} old "
                                  "pod(s) serve until the provider switches")
    return SurgeVerdict(True)
