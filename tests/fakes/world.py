"""The fakes wired as a miniature of the example shop (:class:`World`): an ESO controller
copying Vault into the Secret, a rollout controller, and readyz answering 200 only when a
consumer's document password equals the password the provider started with — so a unit test
can tell a correct rotation from one that merely ran its steps.  ``World.engine()`` is a real
Engine handed these fakes (nothing is patched)."""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rotate.chain.model import (
    BackendRef,
    Chain,
    Credential,
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
from rotate.chain.sections import (
    AuthConfig,
    BackendConfig,
    ClusterConfig,
    ConfigCenterConfig,
    Defaults,
)
from rotate.clients.seams import (
    ReadyzTarget,
)
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.engine.api import Engine
from rotate.engine.model import Adapters, Options
from rotate.stages.rollout import RESTARTED_AT
from tests.fakes.configcenter import FakeConfigCenter
from tests.fakes.kube import FakeKube
from tests.fakes.providers import FakeConnector
from tests.fakes.readyz import FakeMetrics, FakeReadyz
from tests.fakes.vault import FakeVault


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
#: an environment inside the cluster (rotate.chain.routes): providers reached by ClusterIP
IN_CLUSTER: Mapping[str, str] = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
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
    #: consumer workloads whose pods never start once the template carries a restartedAt
    #: (a bad new template: image, crash loop); their rollout is stuck too.  A template put
    #: back without it (consumer.undo) starts again.
    unstarted: set[str] = field(default_factory=set)
    #: password each running workload started with (provider) / read from its document
    running: dict[str, str] = field(default_factory=dict)
    rollouts: list[str] = field(default_factory=list)
    #: the providers' own servers (live apply methods, provider.verify)
    connector: FakeConnector = field(default_factory=FakeConnector)
    #: PromQL answers (a canary's bake query)
    metrics: FakeMetrics = field(default_factory=FakeMetrics)

    def __post_init__(self) -> None:
        self.readyz = FakeReadyz(self._readyz)
        self.kube.controllers.append(self._eso)
        self.kube.controllers.append(self._rollout)
        self._eso_syncs = 0

    @property
    def adapters(self) -> Adapters:
        return Adapters(self.vault, self.kube, self.cc, self.readyz, self.connector,
                        self.metrics)

    def engine(self, environ: Mapping[str, str] = IN_CLUSTER) -> Engine:
        """A real Engine whose adapters are these fakes and whose chain is this chain."""
        # rotate plays inside the cluster here: providers by ClusterIP (rotate.chain.routes)
        return Engine(WorldAdapters(self), self.load_chain, environ=environ)

    def load_chain(self, path: Path) -> Chain:
        return self.chain

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
        k.put(deployment("dragonfly", "dragonfly",
                         selector={"matchLabels": {"app": "dragonfly"}}))
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
        bad = name in self.unstarted and RESTARTED_AT in (
            obj["spec"]["template"]["metadata"].get("annotations") or {})
        if kind == "Deployment" and name != "dragonfly":  # a consumer's, or a reader's
            self._new_pod(kube, obj, started=not bad)
        if name in self.stuck or bad:
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

    @staticmethod
    def _new_pod(kube: FakeKube, obj: dict[str, Any], *, started: bool) -> None:
        """The consumer rollout's new pod (one per generation), with the template's
        annotations as the ReplicaSet controller copies them, started or never."""
        meta = obj["metadata"]
        pod_name = f"{meta['name']}-g{meta['generation']}"
        if ("Pod", meta["namespace"], pod_name) in kube.objects:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": pod_name, "namespace": meta["namespace"], "labels": {"app": meta["name"]},
            "annotations": dict(obj["spec"]["template"]["metadata"].get("annotations") or {})},
            "spec": copy.deepcopy(obj["spec"]["template"]["spec"]),
            "status": {"phase": "Running", "startTime": now, "containerStatuses": [
                {"name": c["name"], "started": started, "ready": False}
                for c in obj["spec"]["template"]["spec"]["containers"]]}})

    def reloader_runs(self) -> None:
        """A stakater Reloader Deployment, available (what rotate looks for before waiting)."""
        dep = deployment("reloader", "reloader")
        dep["metadata"]["labels"] = {"app.kubernetes.io/name": "reloader"}
        self.kube.put(dep)

    def pod_started_now(self, ns: str, app: str) -> None:
        """A pod of ``app`` (label app=APP) that started now: what a roll's new pod looks like."""
        now = datetime.now(UTC)
        self.kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{app}-{now.strftime('%H%M%S%f')}", "namespace": ns,
            "labels": {"app": app}}, "status": {"startTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}})

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


class WorldAdapters:
    """The AdapterFactory of a World: every adapter is one of its fakes."""

    def __init__(self, world: World) -> None:
        self.world = world

    def vault(self, chain: Chain, environ: Mapping[str, str]) -> FakeVault:
        return self.world.vault

    def kube(self, chain: Chain, options: Options, environ: Mapping[str, str]) -> FakeKube:
        return self.world.kube

    def config_center(self, chain: Chain, environ: Mapping[str, str]) -> FakeConfigCenter:
        return self.world.cc

    def providers(self) -> FakeConnector:
        return self.world.connector

    def readyz(self, kube: object) -> FakeReadyz:
        return self.world.readyz

    def metrics(self) -> FakeMetrics:
        return self.world.metrics


def assert_no_secret(text: str, *values: str) -> None:
    for v in values:
        assert v not in text, "a secret value leaked"
