"""Server-side printing: ``meta.k8s.io/v1`` Table responses for ``kubectl get``.

kubectl asks ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...``.  A plain list
would also do, but then kubectl prints only names; the columns here are the ones real servers
print (and ESO's printer columns), so ``kubectl get pods`` reads as on a real cluster.
Rows carry the object's metadata (PartialObjectMetadata) for ``-A``, ``-L`` and ``--show-labels``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rotate_lab.cluster.api.resources import Kind

Obj = dict[str, Any]
Column = tuple[str, str, int, Callable[[Obj], Any]]  # name, type, priority, cell


def wants_table(accept: str | None) -> bool:
    return bool(accept) and "as=Table" in str(accept)


def age(ts: str | None) -> str:
    if not ts:
        return "<unknown>"
    try:
        then = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    s = max(0, int((datetime.now(UTC) - then).total_seconds()))
    if s < 120:
        return f"{s}s"
    if s < 600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 3 * 3600:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _g(obj: Obj, *path: str, default: Any = None) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return default
        cur = cur[p]
    return cur


def _cond(obj: Obj, ctype: str, field: str = "status") -> str:
    for c in _g(obj, "status", "conditions", default=[]) or []:
        if isinstance(c, dict) and c.get("type") == ctype:
            return str(c.get(field) or "")
    return ""


def _pod_ready(obj: Obj) -> str:
    statuses = _g(obj, "status", "containerStatuses", default=[]) or []
    total = len(_g(obj, "spec", "containers", default=[]) or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(obj: Obj) -> str:
    if _g(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    for s in _g(obj, "status", "containerStatuses", default=[]) or []:
        waiting = _g(s, "state", "waiting", "reason")
        if waiting:
            return str(waiting)
        terminated = _g(s, "state", "terminated", "reason")  # a Job's pod: Completed/Error
        if terminated:
            return str(terminated)
    return str(_g(obj, "status", "reason") or _g(obj, "status", "phase") or "Pending")


def _ports(obj: Obj) -> str:
    out = []
    for p in _g(obj, "spec", "ports", default=[]) or []:
        out.append(f"{p.get('port')}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _endpoints(obj: Obj) -> str:
    out = []
    for sub in obj.get("subsets") or []:
        for a in sub.get("addresses") or []:
            for p in sub.get("ports") or [{}]:
                out.append(f"{a.get('ip')}:{p.get('port')}" if p else str(a.get("ip")))
    return ",".join(out) or "<none>"


def _meta_age(obj: Obj) -> str:
    return age(_g(obj, "metadata", "creationTimestamp"))


def _containers(obj: Obj) -> str:
    return ",".join(str(c.get("name")) for c in _g(
        obj, "spec", "template", "spec", "containers", default=[]) or [])


def _images(obj: Obj) -> str:
    return ",".join(str(c.get("image")) for c in _g(
        obj, "spec", "template", "spec", "containers", default=[]) or [])


def _selector(obj: Obj) -> str:
    from rotate_lab.cluster.api.selectors import spec_to_query

    return spec_to_query(_g(obj, "spec", "selector")) or "<none>"


def _job_status(obj: Obj) -> str:
    """kubectl's STATUS column for a Job: Complete, Failed, Suspended or Running."""
    for ctype in ("Complete", "Failed", "Suspended"):
        if _cond(obj, ctype) == "True":
            return ctype
    return "Running"


def _job_duration(obj: Obj) -> str:
    start = _g(obj, "status", "startTime")
    if not start:
        return ""
    end = _g(obj, "status", "completionTime")
    try:
        t0 = datetime.strptime(str(start), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        t1 = (datetime.strptime(str(end), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
              if end else datetime.now(UTC))
    except ValueError:
        return ""
    seconds = max(0, int((t1 - t0).total_seconds()))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


_NAME: Column = ("Name", "string", 0, lambda o: _g(o, "metadata", "name"))
_WIDE: list[Column] = [("Containers", "string", 1, _containers),
                       ("Images", "string", 1, _images), ("Selector", "string", 1, _selector)]
_AGE: Column = ("Age", "string", 0, _meta_age)
_COLUMNS: dict[str, list[Column]] = {
    "Pod": [_NAME, ("Ready", "string", 0, _pod_ready), ("Status", "string", 0, _pod_status),
            ("Restarts", "string", 0, lambda o: str(sum(
                int(s.get("restartCount") or 0)
                for s in _g(o, "status", "containerStatuses", default=[]) or []))),
            _AGE, ("IP", "string", 1, lambda o: _g(o, "status", "podIP") or "<none>"),
            ("Node", "string", 1, lambda o: _g(o, "spec", "nodeName") or "<none>")],
    "Deployment": [_NAME, ("Ready", "string", 0, lambda o: (
        f"{_g(o, 'status', 'readyReplicas', default=0) or 0}/{_g(o, 'spec', 'replicas')}")),
        ("Up-to-date", "integer", 0, lambda o: _g(o, "status", "updatedReplicas", default=0)),
        ("Available", "integer", 0, lambda o: _g(o, "status", "availableReplicas", default=0)),
        _AGE, *_WIDE],
    "ReplicaSet": [_NAME, ("Desired", "integer", 0, lambda o: _g(o, "spec", "replicas")),
                   ("Current", "integer", 0, lambda o: _g(o, "status", "replicas", default=0)),
                   ("Ready", "integer", 0,
                    lambda o: _g(o, "status", "readyReplicas", default=0)), _AGE, *_WIDE],
    "StatefulSet": [_NAME, ("Ready", "string", 0, lambda o: (
        f"{_g(o, 'status', 'readyReplicas', default=0) or 0}/{_g(o, 'spec', 'replicas')}")),
        _AGE, *_WIDE[:2]],
    "Service": [_NAME, ("Type", "string", 0, lambda o: _g(o, "spec", "type")),
                ("Cluster-IP", "string", 0, lambda o: _g(o, "spec", "clusterIP") or "<none>"),
                ("External-IP", "string", 0, lambda o: "<none>"),
                ("Port(s)", "string", 0, _ports), _AGE],
    "Endpoints": [_NAME, ("Endpoints", "string", 0, _endpoints), _AGE],
    "Secret": [_NAME, ("Type", "string", 0, lambda o: o.get("type")),
               ("Data", "integer", 0, lambda o: len(o.get("data") or {})), _AGE],
    "ConfigMap": [_NAME, ("Data", "integer", 0, lambda o: len(o.get("data") or {})), _AGE],
    "Namespace": [_NAME, ("Status", "string", 0, lambda o: _g(o, "status", "phase")), _AGE],
    "Event": [("Last Seen", "string", 0, lambda o: age(o.get("lastTimestamp"))),
              ("Type", "string", 0, lambda o: o.get("type")),
              ("Reason", "string", 0, lambda o: o.get("reason")),
              ("Object", "string", 0, lambda o: (
                  f"{str(_g(o, 'involvedObject', 'kind') or '').lower()}/"
                  f"{_g(o, 'involvedObject', 'name')}")),
              ("Message", "string", 0, lambda o: o.get("message"))],
    "Lease": [_NAME, ("Holder", "string", 0,
                      lambda o: _g(o, "spec", "holderIdentity") or ""), _AGE],
    "ExternalSecret": [_NAME, ("Store", "string", 0,
                               lambda o: _g(o, "spec", "secretStoreRef", "name")),
                       ("Refresh Interval", "string", 0,
                        lambda o: _g(o, "spec", "refreshInterval")),
                       ("Status", "string", 0, lambda o: _cond(o, "Ready", "reason")),
                       ("Ready", "string", 0, lambda o: _cond(o, "Ready"))],
    "SecretStore": [_NAME, _AGE, ("Status", "string", 0, lambda o: _cond(o, "Ready", "reason")),
                    ("Ready", "string", 0, lambda o: _cond(o, "Ready"))],
}
_COLUMNS["ClusterSecretStore"] = _COLUMNS["SecretStore"]
_COLUMNS["Job"] = [
    _NAME, ("Status", "string", 0, _job_status),
    ("Completions", "string", 0, lambda o: (
        f"{_g(o, 'status', 'succeeded', default=0) or 0}/{_g(o, 'spec', 'completions')}")),
    ("Duration", "string", 0, _job_duration), _AGE, *_WIDE]
_COLUMNS["CronJob"] = [
    _NAME, ("Schedule", "string", 0, lambda o: _g(o, "spec", "schedule")),
    ("Timezone", "string", 0, lambda o: _g(o, "spec", "timeZone") or "<none>"),
    # upstream's printBoolPtr: the strings "True"/"False", which kubectl shows as they are
    ("Suspend", "boolean", 0, lambda o: str(bool(_g(o, "spec", "suspend")))),
    ("Active", "integer", 0, lambda o: len(_g(o, "status", "active", default=[]) or [])),
    ("Last Schedule", "string", 0, lambda o: (
        age(_g(o, "status", "lastScheduleTime")) if _g(o, "status", "lastScheduleTime")
        else "<none>")), _AGE]
_COLUMNS["PersistentVolumeClaim"] = [
    _NAME, ("Status", "string", 0, lambda o: _g(o, "status", "phase") or "Pending"), _AGE]


def to_table(kind: Kind, items: list[Obj], resource_version: str,
             include_object: str | None = None) -> dict[str, Any]:
    """``include_object``: the ``includeObject`` query parameter — ``Object`` embeds whole
    objects (kubectl asks for that with ``--sort-by``), ``None`` none, default metadata."""
    columns = _COLUMNS.get(kind.kind, [_NAME, _AGE])
    rows = []
    for obj in items:
        cells = []
        for _, _, _, cell in columns:
            try:
                value = cell(obj)
            except (TypeError, ValueError, AttributeError):
                value = "<unknown>"
            cells.append("<none>" if value is None else value)
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj.get("metadata") or {}}
        rows.append(row)
    return {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {"name": name, "type": typ, "format": "name" if name == "Name" else "",
             "description": name, "priority": prio} for name, typ, prio, _ in columns],
        "rows": rows,
    }
