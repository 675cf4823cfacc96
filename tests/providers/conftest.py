"""Fixtures of the provider tests: one Redis and one PostgreSQL "world" per test, real or
fake, with the same set-up verbs, so the contract and stage tests run the same checks against
both (tests/fakes/providers.py is held to the real adapters this way)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rotate.clients.postgres import PostgresLoginProbe, PostgresRoles
from rotate.clients.redis_acl import RedisAcl, RedisAuthProbe
from rotate.clients.seams import Endpoint
from rotate.core.secret import Secret
from tests.fakes.providers import (
    FakeAclUser,
    FakePostgresRoles,
    FakePostgresServer,
    FakeProbe,
    FakeRedisAcl,
    FakeRedisServer,
)
from tests.support.provider_servers import PostgresServer, postgres_server, redis_server
from tests.support.provider_worlds import ADMIN_PW, PgWorld, RedisWorld


@pytest.fixture(params=["fake", "real"])
def redis_world(request: pytest.FixtureRequest) -> Iterator[RedisWorld]:
    if request.param == "fake":
        server = FakeRedisServer(users={"default": FakeAclUser([ADMIN_PW])})

        def fake_user(name: str, passwords: list[str]) -> None:
            server.users[name] = FakeAclUser(list(passwords), acl_admin=False)

        yield RedisWorld("fake", FakeRedisAcl(server, "default", Secret(ADMIN_PW)),
                         FakeProbe(server), fake_user,
                         lambda u, p: FakeRedisAcl(server, u, p))
        return
    with redis_server(ADMIN_PW) as real:
        endpoint = Endpoint(real.host, real.port)
        admin = RedisAcl.connect(endpoint, "default", Secret(ADMIN_PW))

        def real_user(name: str, passwords: list[str]) -> None:
            import redis

            with redis.Redis(host=real.host, port=real.port, password=ADMIN_PW) as r:
                r.execute_command("ACL", "SETUSER", name, "reset", "on", "~*", "+@read",
                                  *(">" + p for p in passwords))

        try:
            yield RedisWorld("real", admin, RedisAuthProbe(endpoint), real_user,
                             lambda u, p: RedisAcl.connect(endpoint, u, p))
        finally:
            admin.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture(params=["fake", "real"])
def pg_world(request: pytest.FixtureRequest) -> Iterator[PgWorld]:
    if request.param == "fake":
        server = FakePostgresServer()
        server.add_role("postgres", ADMIN_PW, superuser=True)

        def fake_role(name: str, password: str | None, *, login: bool = True,
                      member_of: tuple[str, ...] = ()) -> None:
            server.add_role(name, password, login=login, member_of=set(member_of))

        yield PgWorld("fake", FakePostgresRoles(server, "postgres", Secret(ADMIN_PW)),
                      FakeProbe(server), fake_role, lambda: "\n".join(server.statements),
                      lambda u, p: FakePostgresRoles(server, u, p))
        return
    pg: PostgresServer = request.getfixturevalue("postgres")
    endpoint = Endpoint(pg.host, pg.port)

    def real_role(name: str, password: str | None, *, login: bool = True,
                  member_of: tuple[str, ...] = ()) -> None:
        from psycopg import sql

        verifier = pg.verifier(name, password) if password else None
        stmt = sql.SQL("CREATE ROLE {} {} PASSWORD {}").format(
            sql.Identifier(name), sql.SQL("LOGIN" if login else "NOLOGIN"),
            sql.Literal(verifier))
        pg.sql(stmt.as_string())
        for group in member_of:
            if not pg.sql("SELECT 1 FROM pg_roles WHERE rolname = %s", group):
                pg.sql(sql.SQL("CREATE ROLE {} NOLOGIN").format(
                    sql.Identifier(group)).as_string())
            pg.sql(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group),
                                                    sql.Identifier(name)).as_string())

    admin = PostgresRoles.connect(endpoint, pg.superuser, Secret(pg.superuser_password))
    try:
        yield PgWorld("real", admin, PostgresLoginProbe(endpoint), real_role, pg.log_text,
                      lambda u, p: PostgresRoles.connect(endpoint, u, p))
    finally:
        admin.close()
