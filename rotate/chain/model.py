"""The chain file as frozen values (what is derived from them: rotate.chain.value_graph,
rotate.chain.strategy_rules).

A :class:`Chain` is built only by :func:`rotate.chain.loader.load_chain`, after the file
passed the JSON Schema and the semantic checks, so every invariant the loader checks holds
here: template references name values of the same document, templates do not form cycles,
schema paths exist (they are absolute), credential names are not command names.

Nothing in this module touches the network or the disk, so the engine's plan can be computed
from it in tests without any system around.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rotate.chain.notify import NotifyConfig
from rotate.chain.schedule import Schedule
from rotate.chain.sections import (
    BackendConfig,
    ClusterConfig,
    ConfigCenterConfig,
    Defaults,
    WorkloadConsumers,
)

# Re-exported: the template syntax lives in rotate.chain.templates.
from rotate.chain.templates import is_json_pointer as is_json_pointer
from rotate.chain.templates import render_template as render_template
from rotate.chain.templates import template_refs as template_refs
from rotate.chain.waves import Canary, Waves
from rotate.core.errors import UsageError
from rotate.core.refs import ObjectRef
from rotate.core.strategy import Strategy

API_VERSION = "rotate/v1"

#: Commands of the CLI (cli.md). ``rotate NAME`` dispatches on them before credential names,
#: so a credential named like one could never be rotated: the loader refuses such names.
#: tests/unit/test_cli_usage.py checks that every command of the CLI is here.
RESERVED_CREDENTIAL_NAMES = ("list", "runs", "show", "resume", "rollback", "doctor", "status",
                             "due", "watch", "rbac", "vault-policy", "init", "lab", "help")

DEFAULT_CONFIG_KEY = "bootstrap"
DEFAULT_READYZ_PATH = "/readyz"

EndpointPart = Literal["host", "port", "hostport"]

#: A provider workload (Deployment/StatefulSet/DaemonSet) is a plain object reference.
ProviderRef = ObjectRef


# --------------------------------------------------------------------------- credentials


@dataclass(frozen=True)
class BackendRef:
    path: str  # KV v2 path under the kv mount
    key: str


@dataclass(frozen=True)
class Generate:
    length: int = 40
    alphabet: str = "alnum"  # a name in rotate.core.secret.ALPHABETS or literal characters


@dataclass(frozen=True)
class SecretKeyRef:
    namespace: str
    name: str
    key: str

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef("Secret", self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}#{self.key}"


@dataclass(frozen=True)
class OverlapConfig:
    previous_key: str  # key (in Vault and in the Secret) that keeps the previous value


# --------------------------------------------------------------------------- provider apply

#: How a provider takes a new value (docs/chain-file.md "Provider apply methods"): ``rollout``
#: or the name of a registered method (rotate.chain.methods: built in or from a plug-in).
ApplyMethod = str
#: The wire protocol a provider is proven with (provider.verify): live methods imply theirs
#: (MethodSpec.protocol), a rollout provider names it with ``probe``.
WireProtocol = str
DEFAULT_REDIS_USER = "default"  # the requirepass password
DEFAULT_DATABASE = "postgres"
DEFAULT_SSLMODE = "prefer"


@dataclass(frozen=True)
class ServicePortRef:
    """The provider's Service and port that rotate connects to."""

    namespace: str
    name: str
    port: int | str  # a number, or a port name to look up in the Service

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}:{self.port}"


@dataclass(frozen=True)
class ProviderConnection:
    """How rotate reaches a provider from outside: for the admin session of a live method,
    and for the AUTH/login probes of provider.verify."""

    protocol: WireProtocol
    service: ServicePortRef
    address_env: str | None = None  # host:port override, e.g. behind kubectl port-forward
    tls: bool = False  # redis
    database: str = DEFAULT_DATABASE  # postgres
    sslmode: str = DEFAULT_SSLMODE  # postgres
    #: the method's own fields (MethodSpec.fields) as the chain file gives them, validated
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class AdminAuth:
    """Who the admin connection authenticates as.

    ``password`` None means "the credential itself": rotate authenticates as the rotated user
    with its current value (the old one before the change, the new one after it).
    """

    user: str
    password: SecretKeyRef | None = None


@dataclass(frozen=True)
class JobTemplate:
    """``apply: job``: the custom rotator's container (docs/providers.md "apply: job").  It
    carries no value: rotate mounts the old and new values from a Secret it creates per run
    and phase; ``env`` holds plain name/value pairs only (the schema refuses ``valueFrom``)."""

    image: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    service_account: str | None = None
    deadline: float = 120.0  # the Job's activeDeadlineSeconds, per phase
    #: ``twoValues: true``: the rotator keeps the old value working until ``finish`` (an
    #: API with several live keys), so overlap is allowed and the default
    two_values: bool = False


@dataclass(frozen=True)
class ProviderApply:
    """How one provider workload takes a new value, and how it is proven.

    * ``rollout``: ``connection`` is set only when the chain names a ``probe``; ``user`` is the
      account the probe logs in as; ``admin``/``users`` are None.
    * a live method (``redis-acl``, ``postgres``, a plug-in's): ``connection`` and ``admin``
      are always set; exactly one of ``user`` / ``users``.  ``users`` (two accounts) is the
      alternating-users scheme of a method whose account holds one value (``postgres``) with
      ``strategy: overlap``; ``username_key`` then names the key (in the backend and in the
      Secret) that carries the active account's name.
    """

    provider: ObjectRef
    method: ApplyMethod = "rollout"
    connection: ProviderConnection | None = None
    user: str | None = None
    users: tuple[str, str] | None = None
    username_key: str | None = None
    admin: AdminAuth | None = None
    job: JobTemplate | None = None  # apply: job

    @property
    def declares_two_values(self) -> bool:
        """The entry itself says its provider holds two values (``job.twoValues``), where
        its method's spec holds one."""
        return self.job is not None and self.job.two_values

    @property
    def live(self) -> bool:
        return self.method != "rollout"

    def admin_is_credential(self, credential_secret: SecretKeyRef) -> bool:
        """Whether the admin authenticates with the rotated credential's own value."""
        return self.admin is not None and (
            self.admin.password is None or self.admin.password == credential_secret)


@dataclass(frozen=True)
class Credential:
    """``generate`` is None exactly when the value is read from stdin (``value_from``)."""

    name: str
    backend: BackendRef
    external_secret: ObjectRef  # kind "ExternalSecret"
    secret: SecretKeyRef  # the ExternalSecret's target Secret and key
    providers: tuple[ProviderRef, ...]
    generate: Generate | None = None
    value_from: Literal["stdin"] | None = None
    strategy: Strategy = Strategy.restart
    timeout: float | None = None  # overrides Defaults.timeout for this credential
    #: the age (seconds) the value must not exceed (``maxAge``); None: notify.maxAge, if any
    max_age: float | None = None
    #: when the credential is due whatever its age (``schedule``, cron, UTC;
    #: rotate.chain.schedule); None: its age alone decides (``rotate due``)
    schedule: Schedule | None = None
    #: why ``strategy`` was chosen when the chain file does not set it (default_strategy);
    #: empty when the file sets it
    strategy_reason: str = ""
    overlap: OverlapConfig | None = None
    description: str = ""
    #: One entry per provider, in ``providers`` order; empty means every provider rolls out.
    applies: tuple[ProviderApply, ...] = ()
    #: the consumers' order (``waves``) and the canary baked before the next wave moves
    #: (rotate.chain.waves); None: every consumer in one wave, no bake
    waves: Waves | None = None
    canary: Canary | None = None

    def apply_of(self, provider: ObjectRef) -> ProviderApply:
        """How ``provider`` takes the new value (``rollout`` unless the chain says otherwise)."""
        for entry in self.applies:
            if entry.provider == provider:
                return entry
        return ProviderApply(provider)

    @property
    def live_applies(self) -> tuple[ProviderApply, ...]:
        return tuple(a for a in self.applies if a.live)


# --------------------------------------------------------------------------- value sources


@dataclass(frozen=True)
class LiteralSource:
    value: Any


@dataclass(frozen=True)
class SecretKeySource:
    namespace: str
    name: str
    key: str

    @property
    def secret(self) -> SecretKeyRef:
        return SecretKeyRef(self.namespace, self.name, self.key)


@dataclass(frozen=True)
class ServiceSource:
    namespace: str
    name: str
    port: int | str  # a number, or a port name to look up in the Service
    part: EndpointPart

    @property
    def host(self) -> str:
        return f"{self.name}.{self.namespace}.svc.cluster.local"


@dataclass(frozen=True)
class TemplateSource:
    template: str

    @property
    def refs(self) -> list[str]:
        return template_refs(self.template)


ValueSource = LiteralSource | SecretKeySource | ServiceSource | TemplateSource


# --------------------------------------------------------------------------- services


@dataclass(frozen=True)
class TokenTarget:
    """Where a service's machine token is delivered: one key of a Secret."""

    namespace: str  # defaults to the service's namespace in the file
    name: str
    key: str

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef("Secret", self.namespace, self.name)


@dataclass(frozen=True)
class ReadyzConfig:
    """Either the API server's service proxy (service/port/path) or a plain ``url``."""

    service: str | None = None
    port: int | str | None = None
    path: str = DEFAULT_READYZ_PATH
    url: str | None = None


@dataclass(frozen=True)
class Service:
    name: str
    namespace: str
    workload: ObjectRef
    schema: Path  # absolute (resolved against the chain file's directory)
    values: Mapping[str, ValueSource] = field(hash=False)  # JSON Pointer → source, file order
    token: TokenTarget
    readyz: ReadyzConfig
    config_key: str = DEFAULT_CONFIG_KEY


# --------------------------------------------------------------------------- the chain


@dataclass(frozen=True)
class Chain:
    file: Path  # absolute path of the chain file
    backend: BackendConfig
    cluster: ClusterConfig
    config_center: ConfigCenterConfig | None  # None: every consumer reads its Secret itself
    defaults: Defaults
    credentials: Mapping[str, Credential] = field(hash=False)  # file order
    services: Mapping[str, Service] = field(hash=False)  # file order
    notify: NotifyConfig = field(default_factory=NotifyConfig)  # rotate.chain.notify
    #: where Secret-reading workloads are discovered (none: discovery is off)
    workload_consumers: WorkloadConsumers = field(default_factory=WorkloadConsumers)

    def credential(self, name: str) -> Credential:
        """The named credential; UsageError (exit 2) naming the known ones otherwise."""
        try:
            return self.credentials[name]
        except KeyError:
            known = ", ".join(self.credentials) or "none"
            raise UsageError(
                f"unknown credential {name!r} (the chain file defines: {known})"
            ) from None

    def timeout_for(self, credential: Credential) -> float:
        return credential.timeout if credential.timeout is not None else self.defaults.timeout
