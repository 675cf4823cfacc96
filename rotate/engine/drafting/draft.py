"""``rotate init``: a first chain file drafted from a live cluster and its Config Center.

What is read: the ExternalSecrets (their backend paths and keys, ``spec.data[].remoteRef``
and ``spec.dataFrom[].extract``) and their SecretStores (the KV mount), their target
Secrets, the workloads that read those Secrets (rotate.engine.drafting.workloads), the
Services, and — when a Config Center is given — every service's ``bootstrap`` document
and JSON Schema (rotate.engine.drafting.values).

Invariants: Secret values and document values are compared only by fingerprint
(:class:`rotate.core.fingerprint.Comparer`) and never reach the draft, its comments or any
message; every place where the draft had to choose is recorded in ``guesses`` (rendered as
``# guess:`` comments); whatever could not be drafted is named in ``notes``.  Only reads:
nothing in the cluster or the Config Center changes.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rotate.chain.model import RESERVED_CREDENTIAL_NAMES
from rotate.clients.seams import ConfigCenter, Kube
from rotate.core.errors import ClientError, UsageError
from rotate.core.fingerprint import Comparer
from rotate.engine.drafting.values import SecretPlace, ServicePlace, ValueMatcher
from rotate.engine.drafting.workloads import (
    WORKLOAD_KINDS,
    SecretRead,
    Workload,
    apply_guess,
    secret_reads,
    workload_of,
)

Path_ = tuple[str | int, ...]
LOCK_NAMESPACE = "rotate-system"
CONFIG_KEY = "bootstrap"
#: names a credential may not take: the commands (cli.md "Commands")
COMMANDS = frozenset({*RESERVED_CREDENTIAL_NAMES, "rotate"})
_SUFFIX = re.compile(r"-(password|passwd|secret|secrets|credentials?|creds)$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?$")


@dataclass
class Drafted:
    """The draft: ``data`` is the chain file's content; ``guesses`` maps a path in it to the
    reason of a choice; ``notes`` are file-level; ``schemas`` maps a path relative to the
    chain file to a service's JSON Schema."""

    data: dict[str, Any]
    guesses: dict[Path_, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigCenterNames:
    """The environment variables the drafted file names for the Config Center."""

    url_env: str = "CONFIG_CENTER_URL"
    token_env: str = "CONFIG_CENTER_TOKEN"


def _key_rank(key: str) -> tuple[int, str]:
    lowered = key.lower()
    for rank, word in enumerate(("password", "passwd", "pass", "secret", "token", "key")):
        if lowered == word:
            return (rank, key)
    for rank, word in enumerate(("password", "passwd", "pass", "secret", "token", "key")):
        if word in lowered:
            return (10 + rank, key)
    return (100, key)


def _previous_key(key: str, keys: list[str]) -> str | None:
    for candidate in (f"{key}_previous", f"{key}-previous", f"previous_{key}", f"{key}Previous"):
        if candidate in keys:
            return candidate
    return None


class _Cluster:
    """One read of everything the draft needs from Kubernetes."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        #: None when namespaces cannot be listed (then nothing is said about the lock's)
        self.namespaces: set[str] | None = None
        with contextlib.suppress(ClientError):
            self.namespaces = {o["metadata"]["name"] for o in kube.list("Namespace", None)}
        self.workloads = [workload_of(kind, o) for kind in WORKLOAD_KINDS
                          for o in self._list(kind)]
        self.reads = [r for w in self.workloads for r in secret_reads(w)]
        self.services = self._list("Service")
        self.stores = {("SecretStore", o["metadata"].get("namespace", ""), o["metadata"]["name"]):
                       o for o in self._list("SecretStore", optional=True)}
        self.stores.update({("ClusterSecretStore", "", o["metadata"]["name"]): o
                            for o in self._list("ClusterSecretStore", optional=True)})

    def _list(self, kind: str, *, optional: bool = False) -> list[dict[str, Any]]:
        try:
            return self.kube.list(kind, None)
        except ClientError:
            if optional:
                return []
            raise

    def readers(self, namespace: str, secret: str, key: str) -> list[SecretRead]:
        return [r for r in self.reads if r.workload.namespace == namespace
                and r.secret == secret and r.covers(key)]

    def kv_mount(self, es: Mapping[str, Any]) -> str | None:
        ref = (es.get("spec") or {}).get("secretStoreRef") or {}
        kind = ref.get("kind") or "SecretStore"
        ns = es["metadata"].get("namespace", "") if kind == "SecretStore" else ""
        store = self.stores.get((kind, ns, ref.get("name", "")))
        vault = ((store or {}).get("spec") or {}).get("provider", {}).get("vault") or {}
        path = vault.get("path")
        return str(path) if path else None

    def service_places(self) -> list[ServicePlace]:
        return [ServicePlace(o["metadata"].get("namespace", ""), o["metadata"]["name"],
                             tuple(int(p["port"]) for p in (o.get("spec") or {}).get("ports")
                                   or [] if isinstance(p.get("port"), int)))
                for o in self.services]

    def service_for(self, workload: Workload) -> dict[str, Any] | None:
        labels = workload.labels
        for svc in self.services:
            selector = (svc.get("spec") or {}).get("selector") or {}
            if (svc["metadata"].get("namespace") == workload.namespace and selector
                    and selector.items() <= labels.items()):
                return svc
        return None


DEFAULT_NAMES = ConfigCenterNames()


def draft_chain(kube: Kube, config_center: ConfigCenter | None,
                names: ConfigCenterNames = DEFAULT_NAMES) -> Drafted:
    """The draft chain file of this cluster (module docstring).  UsageError when there is
    no credential to draft (no ExternalSecret whose Secret a workload reads)."""
    cluster = _Cluster(kube)
    comparer = Comparer()
    draft = Drafted(data={"apiVersion": "rotate/v1", "kind": "Chain"})
    secrets: dict[bytes, list[SecretPlace]] = {}
    credentials, mounts = _credentials(cluster, comparer, secrets, draft)
    if not credentials:
        raise UsageError("nothing to draft: no ExternalSecret whose target Secret a "
                         "Deployment, StatefulSet or DaemonSet reads"
                         + (f" ({'; '.join(draft.notes)})" if draft.notes else ""))
    mount = mounts[0] if mounts else "secret"
    draft.data["backend"] = {"kvMount": mount, "auth": {"method": "token"}}
    if len(set(mounts)) > 1:
        draft.guesses[("backend", "kvMount")] = (
            f"the SecretStores name several KV mounts ({', '.join(sorted(set(mounts)))}): "
            "one chain file has one")
    elif not mounts:
        draft.guesses[("backend", "kvMount")] = "no Vault SecretStore found: the usual mount"
    draft.guesses[("backend", "auth", "method")] = (
        "token (BAO_TOKEN/VAULT_TOKEN); in a pod use kubernetes with a role")
    draft.data["cluster"] = {"lockNamespace": LOCK_NAMESPACE}
    draft.guesses[("cluster", "lockNamespace")] = (
        "where the Leases go" + ("" if cluster.namespaces is None
                                 or LOCK_NAMESPACE in cluster.namespaces else
                                 f"; it does not exist yet: kubectl create namespace "
                                 f"{LOCK_NAMESPACE}"))
    draft.data["configCenter"] = {"urlEnv": names.url_env, "tokenEnv": names.token_env}
    draft.data["credentials"] = credentials
    if config_center is None:
        draft.notes.append(f"no Config Center was read ({names.url_env} is not set): no "
                           "services drafted")
    else:
        matcher = ValueMatcher(comparer, secrets, cluster.service_places())
        services = _services(cluster, config_center, matcher, draft)
        if services:
            draft.data["services"] = services
    return draft


def _credential_name(es_ns: str, es_name: str, taken: set[str]) -> str:
    for candidate in (_SUFFIX.sub("", es_name), es_name, f"{es_ns}-{es_name}"):
        candidate = candidate[:50].strip("-")
        if candidate not in taken and candidate not in COMMANDS and _LABEL.match(candidate):
            return candidate
    index = 2
    while f"credential-{index}" in taken:
        index += 1
    return f"credential-{index}"


def _mapping(cluster: _Cluster, es: Mapping[str, Any], target: str
             ) -> tuple[dict[str, tuple[str, str]], str]:
    """Secret key → (backend path, backend key) of one ExternalSecret; why it has none."""
    spec = es.get("spec") or {}
    ns = es["metadata"].get("namespace", "")
    out: dict[str, tuple[str, str]] = {}
    for item in spec.get("data") or []:
        ref = item.get("remoteRef") or {}
        if item.get("secretKey") and ref.get("key") and ref.get("property"):
            out[item["secretKey"]] = (str(ref["key"]), str(ref["property"]))
    for item in spec.get("dataFrom") or []:
        extract = item.get("extract") or {}
        if not extract.get("key"):
            continue
        try:
            keys = cluster.kube.secret_keys(ns, target)
        except ClientError:
            return out, f"its Secret {ns}/{target} cannot be read for the keys of dataFrom"
        for key in keys:
            out.setdefault(key, (str(extract["key"]), key))
    return out, "" if out else "no data[].remoteRef with a property, no dataFrom[].extract"


def _credentials(cluster: _Cluster, comparer: Comparer, secrets: dict[bytes, list[SecretPlace]],
                 draft: Drafted) -> tuple[dict[str, Any], list[str]]:
    credentials: dict[str, Any] = {}
    mounts: list[str] = []
    for es in cluster.kube.list("ExternalSecret", None):
        meta = es["metadata"]
        ns, es_name = meta.get("namespace", ""), meta["name"]
        target = ((es.get("spec") or {}).get("target") or {}).get("name") or es_name
        mapping, why = _mapping(cluster, es, target)
        for key in mapping:
            try:
                value = cluster.kube.read_secret_key(ns, target, key)
            except ClientError:
                value = None
            if value is not None:
                secrets.setdefault(comparer.of(value), []).append(SecretPlace(ns, target, key))
        if not mapping:
            draft.notes.append(f"ExternalSecret {ns}/{es_name} left out: {why}")
            continue
        keys = sorted(mapping, key=_key_rank)
        key = keys[0]
        readers = cluster.readers(ns, target, key)
        workloads = list(dict.fromkeys(r.workload for r in readers))
        if not workloads:
            draft.notes.append(f"ExternalSecret {ns}/{es_name} left out: no Deployment, "
                               f"StatefulSet or DaemonSet reads {ns}/{target}#{key}")
            continue
        name = _credential_name(ns, es_name, set(credentials))
        path, backend_key = mapping[key]
        mount = cluster.kv_mount(es)
        if mount:
            mounts.append(mount)
        cred: dict[str, Any] = {
            "backend": {"path": path, "key": backend_key},
            "generate": {"length": 40, "alphabet": "alnum"},
            "externalSecret": {"namespace": ns, "name": es_name},
            "secret": {"namespace": ns, "name": target, "key": key},
            "providers": [],
        }
        here: Path_ = ("credentials", name)
        draft.guesses[(*here, "generate")] = (
            "40 alphanumeric characters; check what the provider accepts")
        if len(keys) > 1:
            draft.guesses[(*here, "secret", "key")] = (
                f"the credential among the keys {', '.join(sorted(keys))}")
        live = False
        for index, workload in enumerate(workloads):
            read = next(r for r in readers if r.workload == workload)
            fields, reason = apply_guess(read)
            live = live or bool(fields)
            cred["providers"].append({**workload.ref, **fields})
            draft.guesses[(*here, "providers", index)] = reason
        previous = _previous_key(key, list(mapping))
        if previous is not None and not live:
            cred["strategy"] = "overlap"
            cred["overlap"] = {"previousKey": previous}
            draft.guesses[(*here, "strategy")] = (
                f"overlap: the ExternalSecret also maps {previous}, which keeps the "
                "previous value valid while the consumers move")
        credentials[name] = cred
    return credentials, mounts


def _services(cluster: _Cluster, config_center: ConfigCenter, matcher: ValueMatcher,
              draft: Drafted) -> dict[str, Any]:
    services: dict[str, Any] = {}
    for name in config_center.services():
        try:
            doc = config_center.get_key(name, CONFIG_KEY).value
        except ClientError:
            draft.notes.append(f"Config Center service {name} left out: no readable "
                               f"{CONFIG_KEY} document")
            continue
        candidates = [w for w in cluster.workloads if w.name == name]
        if not candidates or not _LABEL.match(name):
            draft.notes.append(f"Config Center service {name} left out: no Deployment, "
                               f"StatefulSet or DaemonSet named {name}")
            continue
        workload = candidates[0]
        here: Path_ = ("services", name)
        if len(candidates) > 1:
            draft.guesses[(*here, "workload")] = (
                f"{len(candidates)} workloads are named {name}; the first one")
        drafted = matcher.draft(doc)
        if not drafted.values:
            draft.notes.append(f"Config Center service {name} left out: no value of its "
                               "document could be drafted")
            continue
        schema_path = f"schemas/{name}.schema.json"
        try:
            draft.schemas[schema_path] = config_center.get_schema(name)
        except ClientError:
            draft.schemas[schema_path] = {"type": "object"}
            draft.guesses[(*here, "schema")] = "the Config Center has no schema: any object"
        service: dict[str, Any] = {
            "namespace": workload.namespace,
            "workload": {"kind": workload.kind, "name": workload.name},
            "schema": schema_path,
            "values": drafted.values,
            "token": {"secret": _token(workload, draft, here)},
            "readyz": _readyz(cluster, workload, draft, here),
        }
        for pointer, why in drafted.guesses.items():
            draft.guesses[(*here, "values", pointer)] = why
        if drafted.left_out:
            draft.guesses[(*here, "values")] = "left out: " + "; ".join(
                f"{p} {why}" for p, why in drafted.left_out.items())
        services[name] = service
    return services


def _token(workload: Workload, draft: Drafted, here: Path_) -> dict[str, str]:
    refs = [(env.get("name", ""), (env.get("valueFrom") or {}).get("secretKeyRef") or {})
            for c in workload.containers() for env in c.get("env") or []]
    refs = [(n, r) for n, r in refs if r.get("name") and r.get("key")]
    for words in (("CONFIG", "TOKEN"), ("TOKEN",)):
        for env, ref in refs:
            if all(word in env.upper() for word in words):
                if "CONFIG" not in env.upper():
                    draft.guesses[(*here, "token")] = f"the Secret behind {env}"
                return {"name": ref["name"], "key": ref["key"]}
    draft.guesses[(*here, "token")] = (
        "no environment variable of the workload names a token Secret: the usual name "
        "(rotate creates it if absent)")
    return {"name": f"{workload.name}-config-token", "key": "token"}


def _readyz(cluster: _Cluster, workload: Workload, draft: Drafted, here: Path_
            ) -> dict[str, Any]:
    probe: Mapping[str, Any] = {}
    for container in workload.containers():
        probe = (container.get("readinessProbe") or {}).get("httpGet") or {}
        if probe:
            break
    svc = cluster.service_for(workload)
    if svc is None:
        draft.guesses[(*here, "readyz")] = (
            f"no Service selects {workload}: the usual names; or give url:")
        return {"service": workload.name, "port": "http", "path": probe.get("path", "/readyz")}
    ports = (svc.get("spec") or {}).get("ports") or [{}]
    wanted = probe.get("port")
    port = next((p for p in ports if wanted is not None
                 and wanted in (p.get("targetPort"), p.get("name"))), ports[0])
    if not probe:
        draft.guesses[(*here, "readyz")] = "the workload has no HTTP readinessProbe: /readyz"
    return {"service": svc["metadata"]["name"], "port": port.get("name") or port.get("port"),
            "path": probe.get("path", "/readyz")}
