"""Hand-written fakes of the seams (rotate.clients.seams), small enough to trust.

``FakeKube`` keeps objects with a global resourceVersion, generation bumps on spec changes,
watches, and synchronous "controllers" (plain callables run after every mutation) so an ESO
sync or a rollout happens deterministically, without sleeps.  ``World`` wires the fakes into
a miniature of the example shop: an ESO controller copying Vault into the Secret, a rollout
controller, and readyz answering 200 only when a consumer's document password equals the
password the provider started with — so a unit test can tell a correct rotation from one that
merely ran its steps.
"""

from __future__ import annotations

import base64
import copy
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rotate.chain.model import (
    AuthConfig,
    BackendConfig,
    BackendRef,
    Chain,
    ClusterConfig,
    ConfigCenterConfig,
    Credential,
    Defaults,
    Generate,
    LiteralSource,
    ReadyzConfig,
    SecretKeySource,
    Service,
    ServiceSource,
    TemplateSource,
    TokenTarget,
    ValueSource,
)
from rotate.clients.seams import (
    KvMetadata,
    KvVersion,
    MintedToken,
    PatchType,
    ReadyzTarget,
    TokenInfo,
    VersionedDoc,
    WatchEvent,
)
from rotate.core.errors import ClientError, ConflictError, NotFoundError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret, reveal_tree
from rotate.engine.preflight import Adapters


class Faults:
    """``faults.arm("write", exc, times=1)`` makes the next call of that method raise."""

    def __init__(self) -> None:
        self._armed: dict[str, list[Any]] = {}
        self.calls: dict[str, int] = {}

    def arm(self, op: str, exc: BaseException, times: int = 1, skip: int = 0) -> None:
        """Raise ``exc`` on the next ``times`` calls of ``op`` after ``skip`` calls pass."""
        self._armed[op] = [exc, times, skip]

    def clear(self) -> None:
        self._armed.clear()

    def hit(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        armed = self._armed.get(op)
        if armed and armed[1] != 0:
            if armed[2] > 0:
                armed[2] -= 1
                return
            armed[1] -= 1
            raise armed[0]


# --------------------------------------------------------------------------- Vault


class FakeVault:
    def __init__(self, mount: str = "secret") -> None:
        self.mount = mount
        self.versions: dict[str, list[dict[str, str]]] = {}
        self.custom: dict[str, dict[str, str]] = {}
        self.capability_map: dict[str, list[str]] = {}
        self.faults = Faults()
        self.writes = 0

    @property
    def address(self) -> str:
        return "http://127.0.0.1:8200"

    def health(self) -> None:
        self.faults.hit("health")

    def read_metadata(self, path: str) -> KvMetadata:
        self.faults.hit("read_metadata")
        if path not in self.versions:
            raise NotFoundError("vault", f"metadata {path}", "not found", status=404)
        vs = self.versions[path]
        return KvMetadata(path, len(vs), 1, {
            i + 1: KvVersion(i + 1, "2026-01-01T00:00:00Z", "", False) for i in range(len(vs))
        }, dict(self.custom.get(path, {})))

    def read(self, path: str, version: int | None = None) -> dict[str, Secret]:
        self.faults.hit("read")
        vs = self.versions.get(path)
        if not vs:
            raise NotFoundError("vault", f"read {path}", "not found", status=404)
        v = version or len(vs)
        if v < 1 or v > len(vs):
            raise NotFoundError("vault", f"read {path} v{v}", "not found", status=404)
        return {k: Secret(x) for k, x in vs[v - 1].items()}

    def write(self, path: str, data: Mapping[str, Secret], *, cas: int) -> int:
        self.faults.hit("write")
        vs = self.versions.setdefault(path, [])
        if cas != len(vs):
            raise ConflictError("vault", f"write {path}", "check-and-set mismatch")
        vs.append({k: v.reveal() for k, v in data.items()})
        self.writes += 1
        return len(vs)

    def set_custom_metadata(self, path: str, metadata: Mapping[str, str]) -> None:
        self.faults.hit("set_custom_metadata")
        self.versions.setdefault(path, [])
        self.custom.setdefault(path, {}).update(metadata)

    def capabilities(self, paths: Sequence[str]) -> dict[str, list[str]]:
        return {p: list(self.capability_map.get(p, ["read", "update", "create"])) for p in paths}

    # test helpers
    def current(self, path: str, key: str) -> str:
        return self.versions[path][-1][key]


# --------------------------------------------------------------------------- Kubernetes

Key = tuple[str, str, str]  # kind, namespace, name


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


Controller = Callable[["FakeKube", str, str, str], None]


class FakeKube:
    def __init__(self) -> None:
        self._lock = threading.Condition(threading.RLock())
        self.objects: dict[Key, dict[str, Any]] = {}
        self._rv = itertools.count(100)
        self.events: list[tuple[int, str, Key, dict[str, Any]]] = []
        self.controllers: list[Controller] = []
        self.denied: set[tuple[str, str, str | None]] = set()
        self.faults = Faults()
        self.patches: list[tuple[str, str, str, Any]] = []
        self.deleted: list[Key] = []
        self._closed = False
        self.watches_started = 0

    @property
    def server(self) -> str:
        return "https://127.0.0.1:6443"

    # ---------------------------------------------------------------- internals

    def _bump(self, key: Key, obj: dict[str, Any], event: str) -> dict[str, Any]:
        rv = next(self._rv)
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        self.events.append((rv, event, key, copy.deepcopy(obj)))
        self._lock.notify_all()
        return obj

    def _get(self, key: Key) -> dict[str, Any]:
        if key not in self.objects:
            raise NotFoundError("kubernetes", f"get {key[0].lower()}/{key[1]}/{key[2]}",
                                "not found", status=404)
        return self.objects[key]

    def _run_controllers(self, kind: str, ns: str, name: str) -> None:
        for c in list(self.controllers):
            c(self, kind, ns, name)

    @staticmethod
    def _public(obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        if out.get("kind") == "Secret":
            out.pop("data", None)
        return out

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Test setup: store an object as is (kind/metadata required), no controllers."""
        with self._lock:
            meta = obj.setdefault("metadata", {})
            key = (obj["kind"], meta.get("namespace", ""), meta["name"])
            meta.setdefault("generation", 1)
            meta.setdefault("uid", f"uid-{key[2]}")
            self.objects[key] = obj
            return self._bump(key, obj, "ADDED")

    def set_status(self, kind: str, ns: str, name: str, status: dict[str, Any]) -> None:
        """What a controller does: replace .status (no generation change)."""
        with self._lock:
            obj = self._get((kind, ns, name))
            obj["status"] = status
            self._bump((kind, ns, name), obj, "MODIFIED")

    def raw(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        return self.objects[(kind, ns, name)]

    # ---------------------------------------------------------------- Kube protocol

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        self.faults.hit("get")
        with self._lock:
            return self._public(self._get((kind, namespace or "", name)))

    def list(self, kind: str, namespace: str | None, *, label_selector: str | None = None
             ) -> list[dict[str, Any]]:
        with self._lock:
            return [self._public(o) for (k, ns, _), o in self.objects.items()
                    if k == kind and (namespace is None or ns == namespace)]

    def create(self, kind: str, namespace: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        self.faults.hit("create")
        with self._lock:
            obj = copy.deepcopy(dict(body))
            obj["kind"] = kind
            meta = obj.setdefault("metadata", {})
            meta["namespace"] = namespace or ""
            key = (kind, namespace or "", meta["name"])
            if key in self.objects:
                raise ConflictError("kubernetes", f"create {kind}", "already exists", status=409)
            meta["generation"] = 1
            meta["uid"] = f"uid-{meta['name']}"
            self.objects[key] = obj
            self._bump(key, obj, "ADDED")
            out = self._public(obj)
        self._run_controllers(kind, namespace or "", meta["name"])
        return out

    def replace(self, kind: str, namespace: str | None, name: str, body: Mapping[str, Any]
                ) -> dict[str, Any]:
        self.faults.hit("replace")
        with self._lock:
            key = (kind, namespace or "", name)
            cur = self._get(key)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise ConflictError("kubernetes", f"replace {kind}", "conflict", status=409)
            obj = copy.deepcopy(dict(body))
            obj["kind"] = kind
            obj["metadata"]["generation"] = cur["metadata"]["generation"] + (
                1 if obj.get("spec") != cur.get("spec") else 0)
            self.objects[key] = obj
            self._bump(key, obj, "MODIFIED")
            out = self._public(obj)
        self._run_controllers(kind, namespace or "", name)
        return out

    def patch(self, kind: str, namespace: str | None, name: str, body: Any, *,
              patch_type: PatchType = "merge") -> dict[str, Any]:
        self.faults.hit("patch")
        with self._lock:
            key = (kind, namespace or "", name)
            cur = self._get(key)
            self.patches.append((kind, namespace or "", name, copy.deepcopy(body)))
            new = _merge(cur, body)
            if new.get("spec") != cur.get("spec"):
                new["metadata"]["generation"] = cur["metadata"]["generation"] + 1
            self.objects[key] = new
            self._bump(key, new, "MODIFIED")
            out = self._public(new)
        self._run_controllers(kind, namespace or "", name)
        return self.get(kind, namespace, name) if self.controllers else out

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        self.faults.hit("delete")
        with self._lock:
            key = (kind, namespace or "", name)
            obj = self._get(key)
            del self.objects[key]
            self.deleted.append(key)
            self._bump(key, obj, "DELETED")
        self._run_controllers(kind, namespace or "", name)

    def watch(self, kind: str, namespace: str | None, *, name: str | None = None,
              resource_version: str | None = None, timeout_seconds: float = 30
              ) -> Iterator[WatchEvent]:
        with self._lock:
            since = int(resource_version) if resource_version else (
                self.events[-1][0] if self.events else 0)
            self.watches_started += 1
        deadline = datetime.now(UTC).timestamp() + min(timeout_seconds, 2.0)
        while not self._closed:
            with self._lock:
                fresh = [e for e in self.events if e[0] > since and e[2][0] == kind
                         and (namespace is None or e[2][1] == namespace)
                         and (name is None or e[2][2] == name)]
                if not fresh:
                    left = deadline - datetime.now(UTC).timestamp()
                    if left <= 0:
                        return
                    self._lock.wait(left)
                    continue
            for rv, typ, _, obj in fresh:
                since = rv
                yield WatchEvent(typ, obj)  # type: ignore[arg-type]

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None:
        self.faults.hit("read_secret_key")
        with self._lock:
            obj = self._get(("Secret", namespace, name))
            raw = (obj.get("data") or {}).get(key)
            return None if raw is None else Secret(base64.b64decode(raw).decode())

    def write_secret_key(self, namespace: str, name: str, key: str, value: Secret) -> str:
        self.faults.hit("write_secret_key")
        with self._lock:
            k = ("Secret", namespace, name)
            obj = self._get(k)
            obj.setdefault("data", {})[key] = base64.b64encode(value.reveal().encode()).decode()
            self._bump(k, obj, "MODIFIED")
            rv = str(obj["metadata"]["resourceVersion"])
        self._run_controllers("Secret", namespace, name)
        return rv

    def can_i(self, verb: str, kind: str, namespace: str | None, *,
              subresource: str | None = None, name: str | None = None) -> bool:
        return (verb, kind, namespace) not in self.denied

    def proxy_get(self, namespace: str, service: str, port: str | int, path: str, *,
                  timeout: float = 5) -> int:
        return 200

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._lock.notify_all()

    # helpers
    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        s = self.read_secret_key(namespace, name, key)
        return s.reveal() if s is not None else None


# --------------------------------------------------------------------------- Config Center


class FakeConfigCenter:
    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.tokens: dict[str, list[dict[str, Any]]] = {}
        self.faults = Faults()
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:8080"

    def health(self) -> None:
        self.faults.hit("health")

    def services(self) -> list[str]:
        return sorted({s for s, _ in self.docs})

    def get_schema(self, service: str) -> dict[str, Any]:
        return {}

    def get_version_number(self, service: str, key: str) -> int | None:
        vs = self.docs.get((service, key))
        return len(vs) if vs else None

    def get_key(self, service: str, key: str) -> VersionedDoc:
        vs = self.docs.get((service, key))
        if not vs:
            raise NotFoundError("config center", f"get {service}/{key}", "not found", status=404)
        return VersionedDoc(len(vs), copy.deepcopy(vs[-1]))

    def get_version(self, service: str, key: str, version: int) -> VersionedDoc:
        return VersionedDoc(version, copy.deepcopy(self.docs[(service, key)][version - 1]))

    def put_key(self, service: str, key: str, value: Mapping[str, Any], *,
                if_match: int | None) -> int:
        self.faults.hit("put_key")
        vs = self.docs.setdefault((service, key), [])
        if (if_match is None and vs) or (if_match is not None and if_match != len(vs)):
            raise ConflictError("config center", f"put {service}/{key}", "version moved",
                                status=412)
        vs.append(reveal_tree(dict(value)))
        self.faults.hit("put_key_applied")  # e.g. a timeout after the server applied it
        return len(vs)

    def restore_version(self, service: str, key: str, version: int, *, if_match: int) -> int:
        old = self.docs[(service, key)][version - 1]
        return self.put_key(service, key, copy.deepcopy(old), if_match=if_match)

    def mint_token(self, service: str) -> MintedToken:
        self.faults.hit("mint_token")
        tid = f"tok-{next(self._ids)}"
        value = f"secret-token-{tid}-xyzzy"
        self.tokens.setdefault(service, []).append({"id": tid, "token": value, "revoked": False})
        return MintedToken(tid, Secret(value), "2027-01-01T00:00:00Z")

    def list_tokens(self, service: str) -> list[TokenInfo]:
        return [TokenInfo(t["id"], "2026-01-01T00:00:00Z", t["revoked"])
                for t in self.tokens.get(service, [])]

    def revoke_token(self, service: str, token_id: str) -> None:
        for t in self.tokens.get(service, []):
            if t["id"] == token_id:
                t["revoked"] = True
                return
        raise NotFoundError("config center", "revoke", "not found", status=404)

    def valid_token(self, service: str, value: str) -> bool:
        return any(t["token"] == value and not t["revoked"] for t in self.tokens.get(service, []))


class FakeReadyz:
    def __init__(self, answer: Callable[[ReadyzTarget], int]) -> None:
        self.answer = answer
        self.calls: list[str] = []

    def status(self, target: ReadyzTarget) -> int:
        self.calls.append(str(target))
        return self.answer(target)


# --------------------------------------------------------------------------- the shop


def deployment(ns: str, name: str, *, replicas: int = 1, probe: bool = True,
               annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": name}
    if probe:
        container["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": 8080}}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "generation": 1,
                     "annotations": dict(annotations or {})},
        "spec": {"replicas": replicas, "template": {"metadata": {"annotations": {}},
                                                    "spec": {"containers": [container]}},
                 **spec},
        "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                   "availableReplicas": replicas, "readyReplicas": replicas},
    }


CONSUMERS = ("cart", "order", "user")
SCHEMA = {
    "type": "object",
    "required": ["service", "dragonfly"],
    "properties": {
        "service": {"type": "object", "properties": {"name": {"type": "string"}}},
        "dragonfly": {
            "type": "object",
            "required": ["host", "port", "password", "url"],
            "properties": {
                "host": {"type": "string"},
                "port": {"type": "integer"},
                "password": {"type": "string", "minLength": 32},
                "url": {"type": "string", "pattern": "^redis://"},
            },
        },
    },
}


def make_chain(tmp: Path, *, consumers: Sequence[str] = CONSUMERS,
               providers: Sequence[ObjectRef] = (ObjectRef("Deployment", "dragonfly",
                                                           "dragonfly"),),
               schema: Mapping[str, Any] = SCHEMA, extra_service: bool = True) -> Chain:
    import json

    schema_file = tmp / "cart.schema.json"
    schema_file.write_text(json.dumps(schema))
    cred = Credential(
        name="dragonfly",
        backend=BackendRef("infra/dragonfly", "password"),
        external_secret=ObjectRef("ExternalSecret", "dragonfly", "dragonfly-password"),
        secret=SecretKeySource("dragonfly", "dragonfly-password-secret", "password").secret,
        providers=tuple(providers),
        generate=Generate(40, "alnum"),
    )
    services: dict[str, Service] = {}
    for name in consumers:
        values: dict[str, ValueSource] = {
            "/service/name": LiteralSource(name),
            "/dragonfly/host": ServiceSource("dragonfly", "dragonfly", 6379, "host"),
            "/dragonfly/port": ServiceSource("dragonfly", "dragonfly", "redis", "port"),
            "/dragonfly/password": SecretKeySource("dragonfly", "dragonfly-password-secret",
                                                   "password"),
            "/dragonfly/url": TemplateSource(
                "redis://:{/dragonfly/password}@{/dragonfly/host}:{/dragonfly/port}/0"),
        }
        services[name] = Service(
            name=name, namespace="shop", workload=ObjectRef("Deployment", "shop", name),
            schema=schema_file, values=values,
            token=TokenTarget("shop", f"{name}-config-token", "token"),
            readyz=ReadyzConfig(service=name, port="http", path="/readyz"),
        )
    if extra_service:
        services["product"] = Service(
            name="product", namespace="shop", workload=ObjectRef("Deployment", "shop", "product"),
            schema=schema_file, values={"/service/name": LiteralSource("product")},
            token=TokenTarget("shop", "product-config-token", "token"),
            readyz=ReadyzConfig(service="product", port="http"),
        )
    return Chain(
        file=tmp / "rotate.yaml",
        backend=BackendConfig("secret", AuthConfig("token")),
        cluster=ClusterConfig("rotate-system"),
        config_center=ConfigCenterConfig("CONFIG_CENTER_TOKEN", url="http://127.0.0.1:8080"),
        defaults=Defaults(timeout=5.0, max_parallel=3, reloader_grace=0.3, lease_duration=30),
        credentials={"dragonfly": cred},
        services=services,
    )


@dataclass
class World:
    """The fakes wired as a tiny cluster around the example shop."""

    chain: Chain
    vault: FakeVault = field(default_factory=FakeVault)
    kube: FakeKube = field(default_factory=FakeKube)
    cc: FakeConfigCenter = field(default_factory=FakeConfigCenter)
    eso_mode: str = "ok"  # ok | stall | error | ready-only | stale-time
    stuck: set[str] = field(default_factory=set)  # workload names whose rollout never completes
    #: password each running workload started with (provider) / read from its document
    running: dict[str, str] = field(default_factory=dict)
    rollouts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.readyz = FakeReadyz(self._readyz)
        self.kube.controllers.append(self._eso)
        self.kube.controllers.append(self._rollout)
        self._eso_syncs = 0

    @property
    def adapters(self) -> Adapters:
        return Adapters(self.vault, self.kube, self.cc, self.readyz)

    def setup(self, password: str = "old-password-0123456789abcdefghijklmn") -> None:
        k = self.kube
        self.vault.versions["infra/dragonfly"] = [
            {"password": "first-password-0123456789abcdefghijkl", "username": "default"},
            {"password": password, "username": "default"},
        ]
        for ns in ("dragonfly", "shop", "rotate-system"):
            k.put({"kind": "Namespace", "metadata": {"name": ns, "namespace": ""}})
        k.put({"kind": "ExternalSecret", "metadata": {"name": "dragonfly-password",
                                                      "namespace": "dragonfly"},
               "spec": {"refreshInterval": "1h", "target": {"name": "dragonfly-password-secret"}},
               "status": {"conditions": [{"type": "Ready", "status": "True",
                                          "reason": "SecretSynced", "message": "ok"}],
                          "refreshTime": "2026-01-01T00:00:00Z"}})
        k.put({"kind": "Secret", "metadata": {"name": "dragonfly-password-secret",
                                              "namespace": "dragonfly"},
               "data": {"password": base64.b64encode(password.encode()).decode()}})
        k.put({"kind": "Service", "metadata": {"name": "dragonfly", "namespace": "dragonfly"},
               "spec": {"ports": [{"name": "redis", "port": 6379}]}})
        k.put(deployment("dragonfly", "dragonfly"))
        self.running["dragonfly"] = password
        for name, svc in self.chain.services.items():
            k.put(deployment("shop", name))
            k.put({"kind": "Service", "metadata": {"name": name, "namespace": "shop"},
                   "spec": {"ports": [{"name": "http", "port": 8080}]}})
            doc: dict[str, Any] = {"service": {"name": name}}
            if name in CONSUMERS:
                host = "dragonfly.dragonfly.svc.cluster.local"
                doc["dragonfly"] = {"host": host, "port": 6379, "password": password,
                                    "url": f"redis://:{password}@{host}:6379/0"}
                self.running[name] = password
            self.cc.docs[(name, svc.config_key)] = [doc]
            tok = self.cc.mint_token(name)
            k.put({"kind": "Secret", "metadata": {"name": svc.token.name, "namespace": "shop"},
                   "data": {"token": base64.b64encode(tok.token.reveal().encode()).decode()}})

    # controllers -------------------------------------------------------------

    def _eso(self, kube: FakeKube, kind: str, ns: str, name: str) -> None:
        if kind != "ExternalSecret" or self.eso_mode == "stall":
            return
        es = kube.raw(kind, ns, name)
        if (es.get("spec") or {}).get("refreshPolicy") == "CreatedOnce":
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = copy.deepcopy(es.get("status") or {})
        if self.eso_mode == "error":
            status["conditions"] = [{"type": "Ready", "status": "False",
                                     "reason": "SecretSyncedError",
                                     "message": "could not get secret data from provider"}]
            kube.set_status(kind, ns, name, status)
            return
        if self.eso_mode != "ready-only":
            value = self.vault.current("infra/dragonfly", "password")
            kube.write_secret_key("dragonfly", "dragonfly-password-secret", "password",
                                  Secret(value))
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "SecretSynced",
                                 "message": "Secret was synced"}]
        if self.eso_mode != "stale-time":
            status["refreshTime"] = now
        self._eso_syncs += 1
        kube.set_status(kind, ns, name, status)

    def _rollout(self, kube: FakeKube, kind: str, ns: str, name: str) -> None:
        if kind not in ("Deployment", "StatefulSet", "DaemonSet"):
            return
        obj = kube.raw(kind, ns, name)
        gen = obj["metadata"]["generation"]
        status = obj.get("status") or {}
        replicas = obj["spec"].get("replicas", 1)
        if status.get("observedGeneration") == gen and status.get("updatedReplicas") == replicas:
            return
        if name in self.stuck:
            kube.set_status(kind, ns, name, {**status, "observedGeneration": gen,
                                             "updatedReplicas": 0})
            return
        self.rollouts.append(f"{ns}/{name}")
        # the new pods start: they read what they read at start
        if name == "dragonfly":
            self.running[name] = kube.secret_value("dragonfly", "dragonfly-password-secret",
                                                   "password") or ""
        elif name in self.chain.services:
            svc = self.chain.services[name]
            doc = self.cc.docs[(name, svc.config_key)][-1]
            if "dragonfly" in doc:
                self.running[name] = doc["dragonfly"]["password"]
            self.running[f"{name}#token"] = kube.secret_value("shop", svc.token.name,
                                                              "token") or ""
        kube.set_status(kind, ns, name, {
            "observedGeneration": gen, "replicas": replicas, "updatedReplicas": replicas,
            "availableReplicas": replicas, "readyReplicas": replicas,
        })

    def kick(self, name: str, ns: str = "shop", kind: str = "Deployment") -> None:
        """The stuck rollout of ``name`` may now complete (its controller runs once more)."""
        self.stuck.discard(name)
        self._rollout(self.kube, kind, ns, name)

    def _readyz(self, target: ReadyzTarget) -> int:
        name = target.service
        if name in self.running and self.running[name] != self.running.get("dragonfly"):
            return 503
        token = self.running.get(f"{name}#token")
        if token is not None and not self.cc.valid_token(name, token):
            return 503
        return 200


def assert_no_secret(text: str, *values: str) -> None:
    for v in values:
        assert v not in text, "a secret value leaked"


__all__ = ["ClientError", "FakeConfigCenter", "FakeKube", "FakeReadyz", "FakeVault", "World",
           "make_chain"]
