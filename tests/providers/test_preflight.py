"""Preflight of live methods through the real ProviderConnector (rotate.clients.
provider_connect) against real servers: a missing admin Secret or a refused admin credential
fails before anything changes (the engine maps these ClientErrors to exit 3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rotate.chain.model import AdminAuth, ProviderApply, ProviderConnection, SecretKeyRef
from rotate.chain.model import ServicePortRef as Svc
from rotate.clients.provider_connect import Connector
from rotate.core.errors import ForbiddenError, NotFoundError, TemporaryError
from rotate.core.refs import ObjectRef
from rotate.core.secret import Secret, generate
from rotate.providers import access
from rotate.providers.accounts import accounts_for
from tests.fakes.kube_reads import StubKube
from tests.support.provider_servers import PostgresServer, RedisServer, free_port, redis_server
from tests.support.provider_worlds import unique

CRED = SecretKeyRef("dragonfly", "dragonfly-password-secret", "password")
ADMIN_KEY = SecretKeyRef("db", "pg-admin", "password")


@pytest.fixture
def redis_live() -> Iterator[RedisServer]:
    with redis_server("current-value-0123456789") as server:
        yield server


def df(admin: AdminAuth) -> ProviderApply:
    conn = ProviderConnection("redis", Svc("dragonfly", "dragonfly", 6379), address_env="ADDR")
    return ProviderApply(ObjectRef("Deployment", "dragonfly", "dragonfly"), "redis-acl", conn,
                         user="default", admin=admin)


def pg(role: str) -> ProviderApply:
    conn = ProviderConnection("postgres", Svc("db", "postgres", 5432), address_env="ADDR")
    return ProviderApply(ObjectRef("StatefulSet", "db", "postgres"), "postgres", conn,
                         user=role, admin=AdminAuth("postgres", ADMIN_KEY))


def test_redis_preflight_with_the_credential_as_admin(redis_live: RedisServer) -> None:
    env = {"ADDR": f"{redis_live.host}:{redis_live.port}"}
    applied = df(AdminAuth("default"))
    acc = accounts_for(applied, "overlap", None)
    kube: Any = StubKube({})
    current = Secret(redis_live.password)
    found = access.preflight(Connector(), kube, applied, CRED, acc, current, env)
    assert "current value accepted" in found
    with pytest.raises(ForbiddenError):  # the backend's value is not the provider's
        access.preflight(Connector(), kube, applied, CRED, acc, generate(), env)


def test_redis_preflight_with_a_missing_admin_secret(redis_live: RedisServer) -> None:
    env = {"ADDR": f"{redis_live.host}:{redis_live.port}"}
    applied = df(AdminAuth("default", SecretKeyRef("dragonfly", "admin", "password")))
    acc = accounts_for(applied, "overlap", None)
    with pytest.raises(NotFoundError, match="admin secret dragonfly/admin#password"):
        access.preflight(Connector(), StubKube({}), applied, CRED, acc,  # type: ignore[arg-type]
                         Secret(redis_live.password), env)


def test_postgres_preflight_with_a_refused_admin(postgres: PostgresServer) -> None:
    env = {"ADDR": f"{postgres.host}:{postgres.port}"}
    role, current = unique("shop"), generate()
    postgres.sql(f"CREATE ROLE \"{role}\" LOGIN")
    from psycopg import sql

    postgres.sql(sql.SQL("ALTER ROLE {} PASSWORD {}").format(
        sql.Identifier(role), sql.Literal(postgres.verifier(role, current.reveal()))).as_string())
    applied = pg(role)
    acc = accounts_for(applied, "restart", None)
    good: Any = StubKube({}, {("db", "pg-admin", "password"): postgres.superuser_password})
    assert role in access.preflight(Connector(), good, applied, CRED, acc, current, env)
    bad: Any = StubKube({}, {("db", "pg-admin", "password"): "not-the-admin-password"})
    with pytest.raises(ForbiddenError, match="login refused"):
        access.preflight(Connector(), bad, applied, CRED, acc, current, env)


def test_an_unreachable_provider_is_temporary() -> None:
    env = {"ADDR": f"127.0.0.1:{free_port()}"}
    applied = df(AdminAuth("default"))
    acc = accounts_for(applied, "overlap", None)
    with pytest.raises(TemporaryError):
        access.preflight(Connector(timeout=1), StubKube({}), applied, CRED, acc,  # type: ignore[arg-type]
                         generate(), env)
