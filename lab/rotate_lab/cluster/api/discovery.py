"""Discovery documents (``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/G[/V]``).

Legacy (unaggregated) discovery only.  kubectl 1.26+ asks for aggregated discovery first
(``Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,...,
application/json``); answering with ``Content-Type: application/json`` and the legacy body
makes client-go fall back to per-group-version requests, as with older servers.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rotate_lab.cluster.api import resources
from rotate_lab.cluster.api.resources import Kind

VERSION = {
    "major": "1", "minor": "32", "gitVersion": "v1.32.0-rotate-lab",
    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_address}]}


def _group(name: str, versions: tuple[str, ...]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group(g, v) for g, v in resources.groups().items() if g]}


def api_group(group: str) -> dict[str, Any] | None:
    versions = resources.groups().get(group)
    if not group or versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _hash(k: Kind) -> str:
    return hashlib.sha256(f"{k.group}/{k.version}/{k.kind}".encode()).hexdigest()[:16]


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    kinds = resources.kinds_in(group, version)
    if not kinds:
        return None
    out: list[dict[str, Any]] = []
    for k in kinds:
        entry: dict[str, Any] = {"name": k.plural, "singularName": k.singular,
                                 "namespaced": k.namespaced, "kind": k.kind,
                                 "verbs": list(k.verbs)}
        if k.short_names:
            entry["shortNames"] = list(k.short_names)
        if k.categories:
            entry["categories"] = list(k.categories)
        if not k.virtual:
            entry["storageVersionHash"] = _hash(k)
        out.append(entry)
        sub = {"singularName": "", "namespaced": k.namespaced, "kind": k.kind,
               "verbs": ["get", "patch", "update"]}
        if k.status:
            out.append({"name": f"{k.plural}/status", **sub})
        if k.scale:
            out.append({"name": f"{k.plural}/scale", **sub, "group": "autoscaling",
                        "version": "v1", "kind": "Scale"})
        if k.kind == "Pod":
            out.append({"name": "pods/log", **sub, "verbs": ["get"]})
            out.append({"name": "pods/portforward", **sub, "kind": "PodPortForwardOptions",
                        "verbs": ["create", "get"]})
        if k.kind == "ServiceAccount":
            out.append({"name": "serviceaccounts/token", **sub, "group": "authentication.k8s.io",
                        "version": "v1", "kind": "TokenRequest", "verbs": ["create"]})
        if k.kind == "Service":
            out.append({"name": "services/proxy", **sub, "kind": "ServiceProxyOptions",
                        "verbs": ["create", "delete", "get", "patch", "update"]})
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": out}
