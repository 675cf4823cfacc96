"""How provider steps reach a provider: its endpoint, the admin password, the probes.

Set-up shared by preflight, provider.apply, provider.verify and rollback.  Nothing here
changes a provider (it reads the Service, the admin Secret and the backend, and logs in);
see :mod:`rotate.stages.provider_apply` for what is done once connected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from rotate.chain.model import AdminAuth, ProviderApply, ProviderConnection, SecretKeyRef
from rotate.clients.seams import (
    AuthProbe,
    Endpoint,
    Kube,
    PostgresAdmin,
    ProviderConnector,
    RedisAclAdmin,
    Vault,
)
from rotate.core.errors import ForbiddenError, NotFoundError, PermanentError, RejectedError
from rotate.core.secret import Secret
from rotate.stages.provider_apply import Accounts, postgres_preflight, redis_preflight

T = TypeVar("T")


def resolve_endpoint(kube: Kube, connection: ProviderConnection,
                     environ: Mapping[str, str]) -> Endpoint:
    """``addressEnv`` (host:port) when set in the environment; else the Service's ClusterIP and
    port; a headless Service resolves to its first ready endpoint address."""
    override = environ.get(connection.address_env or "")
    if override:
        host, _, port = override.rpartition(":")
        if not host or not port.isdigit():
            raise RejectedError("rotate", f"read {connection.address_env}",
                                "must be host:port")
        return Endpoint(host.strip("[]"), int(port))
    svc_ref = connection.service
    svc = kube.get("Service", svc_ref.namespace, svc_ref.name)
    spec = svc.get("spec", {})
    entry = _service_port(spec.get("ports", []), svc_ref.port, str(svc_ref))
    ip = spec.get("clusterIP")
    if ip and ip != "None":
        return Endpoint(str(ip), int(entry["port"]))
    eps = kube.get("Endpoints", svc_ref.namespace, svc_ref.name)
    target = entry.get("targetPort", entry["port"])
    number = int(target) if str(target).isdigit() else int(entry["port"])
    for subset in eps.get("subsets", []) or []:
        for address in subset.get("addresses", []) or []:
            return Endpoint(str(address["ip"]), number)
    raise NotFoundError("kubernetes", f"service {svc_ref}", "no ready endpoint")


def _service_port(ports: Sequence[Mapping[str, Any]], wanted: int | str,
                  where: str) -> Mapping[str, Any]:
    for p in ports:
        if wanted in (p.get("name"), p.get("port")):
            return p
    raise NotFoundError("kubernetes", f"service {where}", f"no port {wanted!r}")


def admin_candidates(kube: Kube, applied: ProviderApply, credential_secret: SecretKeyRef,
                     old: Secret, new: Secret) -> tuple[Secret, ...]:
    """The admin passwords to try, in order.  The credential itself: the old value, then the
    new one (after the change, and on resume, only the new one works).  Otherwise the named
    Secret key; NotFoundError when it is missing (preflight: exit 3)."""
    admin = applied.admin
    if admin is None:
        raise PermanentError(applied.method, f"admin of {applied.provider}",
                             "apply: rollout has no admin connection")
    if applied.admin_is_credential(credential_secret):
        return (old, new)
    ref = admin.password
    assert ref is not None  # admin_is_credential covers None
    value = kube.read_secret_key(ref.namespace, ref.name, ref.key)
    if value is None:
        raise NotFoundError("kubernetes", f"admin secret {ref}", "key absent")
    return (value,)


def connect_first(connect: Callable[[Secret], T], candidates: Sequence[Secret]) -> T:
    """The first connection whose password is accepted; the last ForbiddenError otherwise."""
    refused: ForbiddenError | None = None
    for password in candidates:
        try:
            return connect(password)
        except ForbiddenError as exc:
            refused = exc
    assert refused is not None, "no candidate password"
    raise refused


def probe_for(connector: ProviderConnector, connection: ProviderConnection,
              endpoint: Endpoint) -> AuthProbe:
    if connection.protocol == "redis":
        return connector.redis_probe(endpoint, tls=connection.tls)
    return connector.postgres_probe(endpoint, database=connection.database,
                                    sslmode=connection.sslmode)


def active_username(vault: Vault, path: str, username_key: str, version: int) -> str | None:
    """The alternating users' active role as the backend holds it at ``version`` (None when
    the key is absent: the first of ``users`` is active).  Not a secret, but stored wrapped
    like every backend value."""
    if version < 1:
        return None
    value = vault.read(path, version).get(username_key)
    return value.reveal() if value is not None else None


# --------------------------------------------------------------------------- opening


def open_probe(connector: ProviderConnector, kube: Kube, applied: ProviderApply,
               environ: Mapping[str, str]) -> AuthProbe | None:
    """The probe provider.verify uses; None for a rollout provider without ``probe``."""
    if applied.connection is None:
        return None
    endpoint = resolve_endpoint(kube, applied.connection, environ)
    return probe_for(connector, applied.connection, endpoint)


def open_redis_admin(connector: ProviderConnector, kube: Kube, applied: ProviderApply,
                     candidates: Sequence[Secret],
                     environ: Mapping[str, str]) -> RedisAclAdmin:
    """The admin session of a ``redis-acl`` provider, with the first accepted candidate
    (see :func:`admin_candidates`)."""
    conn, admin = _live(applied)
    endpoint = resolve_endpoint(kube, conn, environ)
    return connect_first(
        lambda pw: connector.redis_admin(endpoint, admin.user, pw, tls=conn.tls), candidates)


def open_postgres_admin(connector: ProviderConnector, kube: Kube, applied: ProviderApply,
                        candidates: Sequence[Secret],
                        environ: Mapping[str, str]) -> PostgresAdmin:
    conn, admin = _live(applied)
    endpoint = resolve_endpoint(kube, conn, environ)
    return connect_first(
        lambda pw: connector.postgres_admin(endpoint, admin.user, pw, database=conn.database,
                                            sslmode=conn.sslmode), candidates)


def _live(applied: ProviderApply) -> tuple[ProviderConnection, AdminAuth]:
    if applied.connection is None or applied.admin is None:
        raise PermanentError(applied.method, f"admin of {applied.provider}",
                             "apply: rollout has no admin connection")
    return applied.connection, applied.admin


def preflight(connector: ProviderConnector, kube: Kube, applied: ProviderApply,
              credential_secret: SecretKeyRef, accounts: Accounts, current: Secret,
              environ: Mapping[str, str]) -> str:
    """Observe only (exit 3 on any ClientError, nothing changed): the admin Secret exists,
    the admin authenticates (with the credential itself: the *current* value), and the
    method's own preconditions hold (:mod:`rotate.stages.provider_apply`)."""
    candidates = admin_candidates(kube, applied, credential_secret, current, current)[:1]
    probe = open_probe(connector, kube, applied, environ)
    assert probe is not None  # live methods always have a connection
    if applied.method == "redis-acl":
        redis = open_redis_admin(connector, kube, applied, candidates, environ)
        try:
            return redis_preflight(redis, probe, accounts, current)
        finally:
            redis.close()
    pg = open_postgres_admin(connector, kube, applied, candidates, environ)
    try:
        return postgres_preflight(pg, probe, accounts, current)
    finally:
        pg.close()
