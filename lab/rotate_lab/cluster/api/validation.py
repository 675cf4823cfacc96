"""Defaulting and validation the store applies to every write, whoever writes.

Only the rules the lab relies on or that a user of the lab would trip over: names, the
workload selector/template contract, Secret ``stringData``.  Defaults are those a real server
fills in and that controllers and kubectl read (``replicas``, ``strategy``,
``revisionHistoryLimit``, ``progressDeadlineSeconds``, Service ``targetPort``).
Both functions mutate the object handed in (a private copy of the store's).
"""

from __future__ import annotations

import base64
import re
from typing import Any

from rotate_lab.cluster.api.apierrors import ApiError, invalid
from rotate_lab.cluster.api.resources import Kind
from rotate_lab.cluster.api.selectors import SelectorError, selector_from_spec

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_WORKLOADS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")


def apply_defaults(kind: Kind, obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if kind.kind == "Namespace":  # set by every real API server since 1.21
        md = obj.setdefault("metadata", {})
        if isinstance(md, dict) and md.get("name"):
            labels = md.get("labels")
            md["labels"] = {**(labels if isinstance(labels, dict) else {}),
                            "kubernetes.io/metadata.name": md["name"]}
    if kind.kind == "Secret":
        _fold_string_data(obj)
        obj.setdefault("type", "Opaque")
    if not isinstance(spec, dict):
        return
    if kind.kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        spec.setdefault("replicas", 1)
    if kind.kind in ("Deployment", "StatefulSet", "DaemonSet"):
        spec.setdefault("revisionHistoryLimit", 10)
    if kind.kind == "Deployment":
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.setdefault("rollingUpdate", {})
            ru.setdefault("maxSurge", "25%")
            ru.setdefault("maxUnavailable", "25%")
    if kind.kind == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    if kind.kind == "DaemonSet":  # kubectl's rollout status refuses a DaemonSet without it
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.setdefault("rollingUpdate", {})
            ru.setdefault("maxUnavailable", 1)
            ru.setdefault("maxSurge", 0)
    if kind.kind == "Job":
        _job_defaults(obj, spec)
    if kind.kind == "CronJob":
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
    if kind.kind == "Service":
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])


#: the label the lab's Job selector uses (upstream selects by controller-uid, which the
#: store assigns only after defaulting; a Job's name is unique in its namespace all the same)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def _job_defaults(obj: dict[str, Any], spec: dict[str, Any]) -> None:
    """Upstream's Job defaults: one completion, six retries, and a generated selector that
    the pod template's labels carry (``kubectl logs job/NAME`` finds the pods by it)."""
    spec.setdefault("completions", 1)
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("suspend", False)
    name = str((obj.get("metadata") or {}).get("name") or "")
    if name and not spec.get("manualSelector"):
        labels = {JOB_NAME_LABEL: name, "job-name": name}
        spec.setdefault("selector", {"matchLabels": {JOB_NAME_LABEL: name}})
        template = spec.setdefault("template", {})
        if isinstance(template, dict):
            tmeta = template.setdefault("metadata", {})
            if isinstance(tmeta, dict):
                tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}


def _fold_string_data(obj: dict[str, Any]) -> None:
    """``stringData`` is write-only: the server folds it into ``data`` (base64), as k8s does."""
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
        assert isinstance(data, dict)
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def validate(kind: Kind, obj: dict[str, Any]) -> None:
    """Raise a 422 Invalid :class:`ApiError` listing every broken rule; change nothing."""
    md = obj.get("metadata") or {}
    name = str(md.get("name") or "")
    causes: list[tuple[str, str, str]] = []
    if not name:
        causes.append(("metadata.name", "FieldValueRequired",
                       "Required value: name or generateName is required"))
    elif len(name) > 253 or not _NAME_RE.match(name):
        causes.append(("metadata.name", "FieldValueInvalid",
                       f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
                       "of lower case alphanumeric characters, '-' or '.', and must start and "
                       "end with an alphanumeric character"))
    for field in ("labels", "annotations"):
        values = md.get(field)
        if values is not None and (not isinstance(values, dict) or
                                   not all(isinstance(v, str) for v in values.values())):
            causes.append((f"metadata.{field}", "FieldValueInvalid",
                           "Invalid value: values must be strings"))
    if kind.kind in _WORKLOADS:
        causes += _workload_causes(obj)
    if kind.kind == "Job":
        policy = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "restartPolicy")
        if policy not in ("Never", "OnFailure"):
            causes.append(("spec.template.spec.restartPolicy", "FieldValueRequired",
                           'Required value: valid values: "OnFailure", "Never"'))
    if kind.kind == "CronJob":
        causes += _cronjob_causes(obj.get("spec") or {})
    if kind.kind in ("Secret", "ConfigMap"):
        data = obj.get("data")
        if data is not None and not isinstance(data, dict):
            causes.append(("data", "FieldValueInvalid", "Invalid value: must be a map"))
        elif _data_size(kind.kind, obj) > MAX_DATA_BYTES:
            causes.append(("[]", "FieldValueTooLong",
                           f"Too long: must have at most {MAX_DATA_BYTES} bytes"))
        if kind.kind == "Secret" and isinstance(data, dict):
            for key, value in data.items():
                try:
                    base64.b64decode(str(value), validate=True)
                except ValueError:
                    causes.append((f"data[{key}]", "FieldValueInvalid",
                                   "Invalid value: not valid base64"))
    if causes:
        raise invalid(kind, name, causes)


def _cronjob_causes(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Upstream's CronJob rules a user trips over: a parseable schedule without ``TZ=``, a
    known ``timeZone``, a ``concurrencyPolicy`` it knows."""
    from rotate_lab.cluster.api import cronschedule as cron

    causes: list[tuple[str, str, str]] = []
    schedule = str(spec.get("schedule") or "")
    if not schedule:
        causes.append(("spec.schedule", "FieldValueRequired", "Required value"))
    else:
        try:
            cron.parse(schedule, None)
        except cron.ScheduleError as exc:
            why = ("cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
                   if exc.reason == "UnsupportedSchedule" else "not a standard cron schedule")
            causes.append(("spec.schedule", "FieldValueInvalid",
                           f'Invalid value: "{schedule}": {why}'))
    zone = spec.get("timeZone")
    if zone is not None:
        try:
            cron.zone_of(str(zone))
        except cron.ScheduleError:
            causes.append(("spec.timeZone", "FieldValueInvalid",
                           f'Invalid value: "{zone}": unknown time zone {zone}'))
    policy = spec.get("concurrencyPolicy")
    if policy not in (None, "Allow", "Forbid", "Replace"):
        causes.append(("spec.concurrencyPolicy", "FieldValueNotSupported",
                       f'Unsupported value: "{policy}": supported values: "Allow", '
                       '"Forbid", "Replace"'))
    return causes


#: a Secret's or ConfigMap's data (and binaryData) together, as Kubernetes limits them
MAX_DATA_BYTES = 1024 * 1024


def _data_size(kind: str, obj: dict[str, Any]) -> int:
    """Bytes of the object's values as stored (a Secret's data decoded from base64)."""
    total = 0
    for field in ("data", "binaryData"):
        values = obj.get(field)
        if not isinstance(values, dict):
            continue
        for value in values.values():
            text = str(value)
            if kind == "Secret" or field == "binaryData":
                total += len(text) * 3 // 4
            else:
                total += len(text.encode("utf-8"))
    return total


def _workload_causes(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "FieldValueRequired", "Required value")]
    causes: list[tuple[str, str, str]] = []
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (selector.get("matchLabels")
                                              or selector.get("matchExpressions")):
        causes.append(("spec.selector", "FieldValueRequired", "Required value"))
        selector = None
    template = spec.get("template")
    if not isinstance(template, dict):
        causes.append(("spec.template", "FieldValueRequired", "Required value"))
        return causes
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector is not None:
        try:
            matches = selector_from_spec(selector).matches(labels)
        except SelectorError as exc:
            causes.append(("spec.selector", "FieldValueInvalid", f"Invalid value: {exc}"))
        else:
            if not matches:
                causes.append(("spec.template.metadata.labels", "FieldValueInvalid",
                               f"Invalid value: {_labels_text(labels)}: `selector` does not "
                               "match template `labels`"))
    containers = (template.get("spec") or {}).get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("spec.template.spec.containers", "FieldValueRequired", "Required value"))
    replicas = spec.get("replicas")
    if replicas is not None and (not isinstance(replicas, int) or replicas < 0):
        causes.append(("spec.replicas", "FieldValueInvalid",
                       f"Invalid value: {replicas}: must be greater than or equal to 0"))
    return causes


def _labels_text(labels: dict[str, Any]) -> str:
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(labels.items())) + "]"


__all__ = ["ApiError", "apply_defaults", "validate"]
