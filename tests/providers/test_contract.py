"""The provider admin adapters against a real redis-server and a real PostgreSQL, and the
fakes against the same checks (contract); plus what only the real servers can show: the
SCRAM verifier equals the server's own, no plain password reaches the statement log, and
driver errors are translated without their text."""

from __future__ import annotations

import pytest

from rotate.clients.postgres import PostgresLoginProbe, PostgresRoles
from rotate.clients.redis_acl import RedisAcl, RedisAuthProbe
from rotate.clients.seams import Endpoint
from rotate.core.errors import (
    ForbiddenError,
    NotFoundError,
    PermanentError,
    TemporaryError,
)
from rotate.core.secret import Secret, generate
from tests.support.provider_servers import PostgresServer, free_port, redis_server
from tests.support.provider_worlds import ADMIN_PW, PgWorld, RedisWorld, unique

# --------------------------------------------------------------------------- redis contract


def test_redis_user_holds_two_passwords_then_one(redis_world: RedisWorld) -> None:
    w = redis_world
    user, old, new = unique("app"), generate(), generate()
    w.create_user(user, [old.reveal()])
    assert w.admin.user(user).password_count == 1
    w.admin.add_password(user, new)
    w.admin.add_password(user, new)  # idempotent
    assert w.admin.user(user).password_count == 2
    assert w.probe.accepts(user, old) and w.probe.accepts(user, new)
    w.admin.remove_password(user, old)
    w.admin.remove_password(user, old)  # a password not held: not an error
    assert not w.probe.accepts(user, old) and w.probe.accepts(user, new)
    assert w.admin.user(user).password_count == 1


def test_redis_set_only_password_drops_every_other(redis_world: RedisWorld) -> None:
    w = redis_world
    user, a, b, new = unique("app"), generate(), generate(), generate()
    w.create_user(user, [a.reveal(), b.reveal()])
    w.admin.set_only_password(user, new)
    assert [w.probe.accepts(user, s) for s in (a, b, new)] == [False, False, True]


def test_redis_default_user_is_the_requirepass_password(redis_world: RedisWorld) -> None:
    """ACL SETUSER default works like CONFIG SET requirepass, without dropping the others."""
    w = redis_world
    new = generate()
    w.admin.add_password("default", new)
    assert w.probe.accepts("default", new) and w.probe.accepts("default", Secret(ADMIN_PW))
    w.admin.remove_password("default", Secret(ADMIN_PW))
    assert not w.probe.accepts("default", Secret(ADMIN_PW))
    w.admin.user("default")  # the admin session stays authenticated after its password went
    with pytest.raises(ForbiddenError):
        w.connect("default", Secret(ADMIN_PW))
    w.connect("default", new).close()


def test_redis_refuses_an_auth_argument_over_16384_bytes(redis_world: RedisWorld) -> None:
    """What redis-acl's ValueRule declares: a client that has not authenticated may send no
    argument over 16384 bytes ("Protocol error: unauthenticated bulk length", and the
    server closes the connection), even for a password the (authenticated) admin could set.
    Whether the client reads that error before the close is a race: the adapter reports
    "refused by the server" or a closed connection ("unreachable", a TemporaryError a step
    retries until its deadline) — never an answer about the password, which is why rotate
    refuses such a value before anything is changed."""
    w = redis_world
    user, longest, over = unique("big"), Secret("a" * 16384), Secret("a" * 16385)
    w.create_user(user, [longest.reveal(), over.reveal()])
    assert w.probe.accepts(user, longest)
    with pytest.raises((TemporaryError, PermanentError)) as caught:
        w.probe.accepts(user, over)
    assert "a" * 100 not in caught.value.message


def test_redis_unknown_user_and_refused_admin(redis_world: RedisWorld) -> None:
    """ACL SETUSER creates a user it does not know: the adapter refuses instead."""
    w = redis_world
    ghost = unique("nobody")
    for change in (w.admin.add_password, w.admin.remove_password, w.admin.set_only_password):
        with pytest.raises(NotFoundError):
            change(ghost, generate())
    with pytest.raises(NotFoundError):
        w.admin.user(ghost)
    with pytest.raises(ForbiddenError):
        w.connect("default", Secret("wrong-password"))


def test_redis_user_without_acl_permission_cannot_administer(redis_world: RedisWorld) -> None:
    w = redis_world
    user, pw = unique("reader"), generate()
    w.create_user(user, [pw.reveal()])
    weak = w.connect(user, pw)
    with pytest.raises(ForbiddenError) as info:
        weak.add_password(user, generate())
    assert pw.reveal() not in str(info.value)


# --------------------------------------------------------------------------- postgres contract


def test_postgres_set_password_sends_a_verifier_and_login_follows(pg_world: PgWorld) -> None:
    w = pg_world
    role, old, new = unique("app"), generate(), generate()
    w.create_role(role, old.reveal())
    assert w.admin.role_exists(role) and w.admin.can_alter(role)
    assert w.probe.accepts(role, old)
    w.admin.set_password(role, new)
    assert w.probe.accepts(role, new) and not w.probe.accepts(role, old)
    assert new.reveal() not in w.statements() and old.reveal() not in w.statements()
    assert "PASSWORD 'SCRAM-SHA-256$" in w.statements()


def test_postgres_nologin_refuses_and_login_restores(pg_world: PgWorld) -> None:
    w = pg_world
    role, pw = unique("app"), generate()
    w.create_role(role, pw.reveal())
    w.admin.set_login(role, False)
    assert not w.admin.role(role).can_login and not w.probe.accepts(role, pw)
    w.admin.set_login(role, True)
    assert w.admin.role(role).can_login and w.probe.accepts(role, pw)


def test_postgres_unknown_role(pg_world: PgWorld) -> None:
    w = pg_world
    missing = unique("nobody")
    assert not w.admin.role_exists(missing) and not w.admin.can_alter(missing)
    with pytest.raises(NotFoundError):
        w.admin.role(missing)
    with pytest.raises(NotFoundError):
        w.admin.set_password(missing, generate())
    assert not w.probe.accepts(missing, generate())


def test_postgres_grants_of_alternating_roles(pg_world: PgWorld) -> None:
    w = pg_world
    group, other = unique("grp"), unique("grp")
    a, b, c = unique("a"), unique("b"), unique("c")
    w.create_role(a, None, login=False, member_of=(group,))
    w.create_role(b, None, login=False, member_of=(group,))
    w.create_role(c, None, login=False, member_of=(other,))
    assert w.admin.grants(a).differences(w.admin.grants(b)) == []
    diff = w.admin.grants(a).differences(w.admin.grants(c))
    assert any(group in line and a in line for line in diff), diff


def test_postgres_refused_admin(pg_world: PgWorld) -> None:
    with pytest.raises(ForbiddenError):
        pg_world.connect("postgres", Secret("wrong-password"))


# --------------------------------------------------------------------------- real only


def test_the_verifier_comes_from_libpq_with_the_servers_iterations(
        postgres: PostgresServer) -> None:
    """set_password sends what libpq's PQencryptPasswordConn computes on the admin session:
    a SCRAM-SHA-256 verifier with the server's ``scram_iterations`` (PostgreSQL 16+; 4096,
    the fixed count, before), for non-ASCII passwords too (SASLprep is libpq's)."""
    admin = PostgresRoles.connect(Endpoint(postgres.host, postgres.port), postgres.superuser,
                                  Secret(postgres.superuser_password))
    version = int(postgres.sql("SHOW server_version_num")[0][0])
    iterations = int(postgres.sql("SHOW scram_iterations")[0][0]) if version >= 160000 else 4096
    try:
        for password in ("plain-ascii-pw", "pässwörd\u00a0mit nbsp", "Ⅸ\u00ad-soft-hyphen"):
            role = unique("vec")
            postgres.sql(f'CREATE ROLE "{role}" LOGIN')
            admin.set_password(role, Secret(password))
            stored = postgres.sql("SELECT rolpassword FROM pg_authid WHERE rolname = %s",
                                  role)[0][0]
            assert stored.startswith(f"SCRAM-SHA-256${iterations}:")
            assert admin.login_ok(role, Secret(password))
            assert not admin.login_ok(role, Secret(password + "x"))
    finally:
        admin.close()


def test_the_statement_log_never_sees_the_password(postgres: PostgresServer) -> None:
    role, pw = unique("logged"), generate()
    admin = PostgresRoles.connect(Endpoint(postgres.host, postgres.port), postgres.superuser,
                                  Secret(postgres.superuser_password))
    try:
        postgres.sql(f'CREATE ROLE "{role}" NOLOGIN')
        admin.set_password(role, pw)
        admin.set_login(role, True)
        assert admin.login_ok(role, pw)
    finally:
        admin.close()
    log = postgres.log_text()
    assert f'ALTER ROLE "{role}" PASSWORD \'SCRAM-SHA-256$4096:' in log  # log_statement works
    assert pw.reveal() not in log


def test_redis_connections_send_auth_and_nothing_else() -> None:
    """A probe proves AUTH only, and the admin session opens with AUTH alone: no ``CLIENT
    SETINFO`` (which Redis < 7.2 rejects, and which costs two round trips per connection
    through a Service's proxy).  Seen from the server: its command and error counters."""
    import redis

    with redis_server(ADMIN_PW) as real, redis.Redis(host=real.host, port=real.port,
                                                     password=ADMIN_PW) as stats:
        endpoint = Endpoint(real.host, real.port)
        stats.config_resetstat()
        assert RedisAuthProbe(endpoint).accepts("default", Secret(ADMIN_PW))
        RedisAcl.connect(endpoint, "default", Secret(ADMIN_PW)).close()
        commands = set(stats.info("commandstats"))
        assert commands == {"cmdstat_auth", "cmdstat_config|resetstat"}
        assert stats.info("commandstats")["cmdstat_auth"]["calls"] == 2
        assert stats.info("errorstats") == {}


def test_unreachable_servers_are_temporary_and_quiet() -> None:
    nowhere = Endpoint("127.0.0.1", free_port())
    secret = Secret("a-password-that-must-not-leak")
    for call in (lambda: RedisAcl.connect(nowhere, "default", secret),
                 lambda: RedisAuthProbe(nowhere).accepts("default", secret),
                 lambda: PostgresRoles.connect(nowhere, "postgres", secret),
                 lambda: PostgresLoginProbe(nowhere).accepts("postgres", secret)):
        with pytest.raises(TemporaryError) as info:
            call()
        assert secret.reveal() not in str(info.value)
        assert info.value.__cause__ is None and info.value.__suppress_context__
