"""The seams between `rotate` and the systems it drives.

Stages and the engine depend only on these Protocols.  Real adapters:

* :class:`Vault`        — ``rotate.clients.vault.HvacVault`` (hvac; OpenBao and Vault alike)
* :class:`Kube`         — ``rotate.clients.kube.KubeClient`` (kubernetes client, raw REST paths)
* :class:`ConfigCenter` — ``rotate.clients.configcenter.HttpConfigCenter`` (httpx)
* :class:`Readyz`       — ``rotate.clients.readyz`` (service proxy through Kube, or a URL via httpx)

The providers' admin seams (Redis ACL, PostgreSQL roles) are in rotate.clients.provider_seams.

Unit tests above the seams use small hand-written fakes (``tests/fakes/``); one contract suite
per seam (``tests/contracts/``) runs against the fake and the real adapter alike, so the
fakes cannot drift from the adapters.

Contract for every method: it raises only :class:`rotate.core.errors.ClientError`
subclasses (TemporaryError for retryable conditions), and secret material crosses the seam
only as :class:`rotate.core.secret.Secret`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret
from rotate.core.urls import display_url

# --------------------------------------------------------------------------- Vault / OpenBao


@dataclass(frozen=True)
class KvVersion:
    version: int
    created_time: str
    deletion_time: str  # "" when not deleted
    destroyed: bool


@dataclass(frozen=True)
class KvMetadata:
    path: str
    current_version: int  # 0 when the path has metadata but no version yet
    oldest_version: int
    versions: Mapping[int, KvVersion]
    custom_metadata: Mapping[str, str]


@dataclass(frozen=True)
class VaultToken:
    """What OpenBao says of the token rotate uses (``auth/token/lookup-self``): never the
    token itself.  ``ttl`` is seconds left, 0 for a token that never expires (root)."""

    ttl: int
    policies: tuple[str, ...]
    renewable: bool = False


class Vault(Protocol):
    """KV v2 at one mount (e.g. ``secret``). Paths are relative to the mount."""

    @property
    def address(self) -> str: ...

    def health(self) -> None:
        """Raise TemporaryError if unreachable/sealed."""

    def read_metadata(self, path: str) -> KvMetadata:
        """NotFoundError if the path has never been written."""

    def read(self, path: str, version: int | None = None) -> dict[str, Secret]:
        """The key/values of ``version`` (latest when None), every value wrapped."""

    def write(self, path: str, data: Mapping[str, Secret], *, cas: int) -> int:
        """Write all keys of ``data`` as a new version with check-and-set; return the new version.

        ConflictError when the current version is not ``cas``.
        """

    def set_custom_metadata(self, path: str, metadata: Mapping[str, str]) -> None:
        """Merge ``metadata`` into the path's custom_metadata (never secret values)."""

    def capabilities(self, paths: Sequence[str]) -> dict[str, list[str]]:
        """Vault's sys/capabilities-self for each full API path (e.g. ``secret/data/x``)."""

    def lookup_self(self) -> VaultToken:
        """The token's own lookup.  ForbiddenError when OpenBao refuses it: the token is
        invalid or expired — or valid, with a policy that does not grant the lookup (the
        default policy does; ``capabilities`` then still answers)."""


# --------------------------------------------------------------------------- Kubernetes

PatchType = Literal["merge", "strategic", "json"]


@dataclass(frozen=True)
class WatchEvent:
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
    object: Mapping[str, Any]


@dataclass(frozen=True)
class KubeEvent:
    """A core/v1 Event about one object, as ``kubectl describe`` shows it.

    ``uid`` is the object's (``""`` when unknown: ``describe`` then does not list it, since it
    selects events by ``involvedObject.uid``); ``instance`` is the run id (``reportingInstance``).
    Reason and message name steps, objects and versions — never a value.  ``at`` is when it
    happened (its ``firstTimestamp``/``lastTimestamp``), which a queued event is sent after;
    None: when it is sent.
    """

    involved: ObjectRef
    uid: str
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
    action: str
    instance: str
    at: datetime | None = None


class Kube(Protocol):
    """Kubernetes REST, by kind name.

    Kinds: Namespace, Secret, ConfigMap, Service, Endpoints, Pod, Event, Deployment,
    ReplicaSet, StatefulSet, DaemonSet, Lease, ExternalSecret, SecretStore, ClusterSecretStore.
    Objects are plain JSON dicts (as the API server sends them).  Secret objects returned
    by ``get``/``list`` have their ``data`` removed: use :meth:`read_secret_key`.
    """

    @property
    def server(self) -> str: ...

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]: ...

    def list(
        self, kind: str, namespace: str | None, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]: ...

    def list_versioned(
        self, kind: str, namespace: str | None
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        """Every object of ``kind`` in ``namespace`` and the list's own resourceVersion: a
        watch from it neither misses nor repeats a change (rotate.stages.kubecache).  The
        objects' own versions cannot stand in for it: when all of them are older than the
        server's watch history, a watch from the newest one is refused (410) every time."""

    def create(
        self, kind: str, namespace: str | None, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def replace(
        self, kind: str, namespace: str | None, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """PUT; the body's resourceVersion makes it conditional (ConflictError on 409)."""

    def patch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        patch_type: PatchType = "merge",
    ) -> dict[str, Any]: ...

    def delete(self, kind: str, namespace: str | None, name: str) -> None: ...

    def watch(
        self,
        kind: str,
        namespace: str | None,
        *,
        name: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: float = 30,
    ) -> Iterator[WatchEvent]:
        """Events after ``resource_version``; ends quietly when the server closes the stream."""

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None:
        """One key of a Secret, decoded and wrapped; None when the key is absent."""

    def secret_keys(self, namespace: str, name: str) -> builtins.list[str]:
        """The key names of a Secret's data, sorted — never a value (NotFoundError when the
        Secret does not exist)."""

    def write_secret_key(
        self, namespace: str, name: str, key: str, value: Secret, *,
        annotations: Mapping[str, str] | None = None, resource_version: str | None = None,
    ) -> str:
        """Set one key of an existing Secret (merge patch), with ``annotations`` in the same
        patch; return the new resourceVersion.  ``resource_version``: only if the Secret is
        still at it (ConflictError otherwise)."""

    def create_secret(self, namespace: str, name: str, values: Mapping[str, Secret], *,
                      labels: Mapping[str, str] | None = None) -> None:
        """Create an Opaque Secret holding ``values`` (encoded here: a value leaves its
        :class:`Secret` only on the wire); ConflictError when it exists."""

    def pod_log_tail(self, namespace: str, pod: str, lines: int) -> str:
        """The last ``lines`` lines of a pod's log (its first container); NotFoundError when
        the pod or its log is gone.  Unmasked text: the caller redacts what it knows."""

    def can_i(
        self, verb: str, kind: str, namespace: str | None, *, subresource: str | None = None,
        name: str | None = None,
    ) -> bool:
        """SelfSubjectAccessReview (on object ``name`` when given: RBAC resourceNames)."""

    def proxy_get(
        self, namespace: str, service: str, port: str | int, path: str, *, timeout: float = 5
    ) -> int:
        """GET through the API server's service proxy; the HTTP status the service answered."""

    def create_event(self, event: KubeEvent) -> None:
        """Create a core/v1 Event in the involved object's namespace (source.component and
        reportingComponent ``rotate``)."""

    def port_forward(self, namespace: str, pod: str, port: int) -> Endpoint:
        """A loopback address on this machine that relays each connection to ``pod``'s
        ``port`` through the API server (``pods/portforward``, as ``kubectl port-forward``
        does); kept open until :meth:`close_forwards`.  ForbiddenError without the
        permission; TemporaryError for a pod gone or not running, or the API server
        unreachable."""

    def close_forwards(self) -> None:
        """Close every port-forward listener opened (the end of a run or a plan)."""


# --------------------------------------------------------------------------- Config Center


@dataclass(frozen=True)
class VersionedDoc:
    """A document as stored. ``value`` leaves that hold credentials are NOT wrapped: callers
    never display it; rollback goes through :meth:`ConfigCenter.restore_version`."""

    version: int
    value: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class MintedToken:
    id: str
    token: Secret
    expires_at: str


@dataclass(frozen=True)
class TokenInfo:
    id: str
    created_at: str
    revoked: bool
    label: str | None = None  # what the minter tagged it with (rotate: its run id)


class ConfigCenter(Protocol):
    @property
    def url(self) -> str: ...

    def health(self) -> None: ...

    def services(self) -> list[str]: ...

    def get_schema(self, service: str) -> dict[str, Any]: ...

    def get_version_number(self, service: str, key: str) -> int | None:
        """Current version, or None when the key does not exist."""

    def get_key(self, service: str, key: str) -> VersionedDoc: ...

    def get_version(self, service: str, key: str, version: int) -> VersionedDoc:
        """An earlier ``version`` of the document (NotFoundError when there is none)."""

    def put_key(
        self, service: str, key: str, value: Mapping[str, Any], *, if_match: int | None
    ) -> int:
        """Write ``value`` (leaves may be Secret); ``if_match=None`` means create
        (If-None-Match: *).  ConflictError on 412, RejectedError(details) on 422."""

    def restore_version(self, service: str, key: str, version: int, *, if_match: int) -> int:
        """Write the content of an earlier ``version`` as a new version; return it."""

    def mint_token(self, service: str, label: str | None = None) -> MintedToken:
        """A new token; ``label`` (rotate passes its run id) is listed with it."""

    def probe_write(self, service: str, key: str) -> None:
        """Prove this identity may write ``service/key`` without changing it: a PUT
        ``If-Match: "0"`` (a version that never exists) must answer 412 (or 422, a server
        validating the body before preconditions).  Raises the write's error otherwise."""

    def list_tokens(self, service: str) -> list[TokenInfo]: ...

    def revoke_token(self, service: str, token_id: str) -> None: ...


# --------------------------------------------------------------------------- readyz


class Metrics(Protocol):
    def value(self, url: str, expr: str) -> float | None:
        """A PromQL instant query's first value at the Prometheus ``url`` (None: no data;
        TemporaryError when unreachable, PermanentError when the expression is refused)."""


class Readyz(Protocol):
    def status(self, target: ReadyzTarget) -> int:
        """The HTTP status of one GET (TemporaryError when unreachable)."""


@dataclass(frozen=True)
class ReadyzTarget:
    """Either a service proxy path (namespace/service/port/path) or a plain URL."""

    namespace: str
    service: str
    port: str | int
    path: str = "/readyz"
    url: str | None = None

    def __str__(self) -> str:
        if self.url:
            return display_url(self.url)  # shown in details and timeouts
        return f"{self.namespace}/{self.service}:{self.port}{self.path}"


# --------------------------------------------------------------------------- provider endpoint


@dataclass(frozen=True)
class Endpoint:
    """Where a provider listens, as the machine running rotate reaches it (a port-forward of
    :meth:`Kube.port_forward`, or an address); the admin seams of rotate.clients.provider_seams
    connect to it."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"
