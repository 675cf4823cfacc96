"""The chain file's top-level sections as frozen values: ``backend`` (and its ``auth``),
``cluster``, ``configCenter``, ``consumers`` and ``defaults`` — what every credential of the
file shares.  :class:`rotate.chain.model.Chain` holds them.

They name environment variables and files, never a secret: a token or an AppRole secret
id is read from the variable a section names, when it is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

AuthMethod = Literal["token", "kubernetes", "approle"]
DEFAULT_JWT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@dataclass(frozen=True)
class AuthConfig:
    method: AuthMethod
    role: str | None = None  # kubernetes / approle role name
    mount: str | None = None  # auth mount; defaults to the method name
    jwt_path: str = DEFAULT_JWT_PATH  # kubernetes: service-account token file
    role_id_env: str | None = None  # approle: names of env vars, never the values
    secret_id_env: str | None = None

    @property
    def mount_path(self) -> str:
        return self.mount or self.method


@dataclass(frozen=True)
class BackendConfig:
    kv_mount: str
    auth: AuthConfig
    address_env: str | None = None  # overrides BAO_ADDR/VAULT_ADDR lookup when set


@dataclass(frozen=True)
class ClusterConfig:
    lock_namespace: str
    context: str | None = None


@dataclass(frozen=True)
class ConfigCenterConfig:
    """Exactly one of ``url`` / ``url_env`` is set; the admin token always comes from env."""

    token_env: str
    url: str | None = None
    url_env: str | None = None

    def resolve_url(self, environ: Mapping[str, str]) -> str | None:
        if self.url:
            return self.url
        return environ.get(self.url_env or "") or None


@dataclass(frozen=True)
class WorkloadConsumers:
    """Where preflight looks for workloads that read a credential's Secret themselves
    (``consumers.namespaces``): each namespace's Deployments, StatefulSets and DaemonSets
    are listed, and each one whose pod template reads a target Secret is a consumer.  A pod
    reads only Secrets of its own namespace, so a namespace matters only where a target
    Secret lives (the credential's own, or one of another ExternalSecret of its path).

    ``all_namespaces`` (``consumers.allNamespaces: true``): every namespace instead, each kind
    listed once across the cluster (``namespaces`` is then empty).  A workload still reads
    only the Secrets of its own namespace: it is matched against the target Secrets of that
    namespace alone."""

    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False


@dataclass(frozen=True)
class Defaults:
    timeout: float = 120.0  # seconds, per step
    max_parallel: int = 10
    reloader_grace: float = 5.0
    lease_duration: float = 30.0
