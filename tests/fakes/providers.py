"""Fakes of the provider admin seams (rotate.clients.seams: RedisAclAdmin, PostgresAdmin,
AuthProbe, ProviderConnector), held to the real adapters' behaviour by the contract tests in
tests/adapters/test_provider_contract.py.

The fake PostgreSQL stores a stand-in for the verifier the real one stores (a SHA-256 digest
behind the ``SCRAM-SHA-256$`` prefix: the real verifier comes from libpq, which the fake does
not have) and checks a login against it, so "the new password logs in" reads the same on
both.  Every statement it receives is kept in ``statements`` (like
``log_statement = all``) so tests can prove no plain password was ever sent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from rotate.clients.provider_seams import (
    AclUser,
    AuthProbe,
    GrantsProfile,
    PostgresAdmin,
    RedisAclAdmin,
    RoleState,
)
from rotate.clients.seams import Endpoint
from rotate.core.errors import (
    ForbiddenError,
    NotFoundError,
    TemporaryError,
)
from rotate.core.secret import Secret

ENDPOINT = Endpoint("127.0.0.1", 1)
#: the longest argument Redis reads from a client that has not authenticated yet
UNAUTHENTICATED_BULK = 16384


def stand_in_verifier(password: Secret) -> str:
    """What the fake server stores for ``password``: shaped like a verifier, never the text."""
    return "SCRAM-SHA-256$4096:fake$" + hashlib.sha256(password.reveal().encode()).hexdigest()


# --------------------------------------------------------------------------- redis


@dataclass
class FakeAclUser:
    passwords: list[str] = field(default_factory=list)
    enabled: bool = True
    nopass: bool = False
    acl_admin: bool = True  # may run ACL commands


@dataclass
class FakeRedisServer:
    users: dict[str, FakeAclUser] = field(default_factory=dict)
    down: bool = False
    endpoint: Endpoint = ENDPOINT

    def accepts(self, user: str, password: Secret) -> bool:
        if self.down:
            raise TemporaryError("redis", f"AUTH {user}", "unreachable")
        if len(password.reveal().encode("utf-8")) > UNAUTHENTICATED_BULK:
            # as Redis: "Protocol error: unauthenticated bulk length", then the connection
            # closed, which the adapter reports as unreachable (tests/providers/test_contract)
            raise TemporaryError("redis", f"AUTH {user}", "unreachable")
        u = self.users.get(user)
        return bool(u and u.enabled and (u.nopass or password.reveal() in u.passwords))


class FakeRedisAcl:
    def __init__(self, server: FakeRedisServer, admin_user: str, password: Secret) -> None:
        if not server.accepts(admin_user, password):
            raise ForbiddenError("redis", f"connect as {admin_user}", "authentication refused")
        self.server = server
        self._admin = admin_user

    @property
    def endpoint(self) -> Endpoint:
        return self.server.endpoint

    def _check(self, user: str) -> FakeAclUser:
        if self.server.down:
            raise TemporaryError("redis", "ACL", "unreachable")
        if not self.server.users[self._admin].acl_admin:
            raise ForbiddenError("redis", "ACL", "the admin user lacks the ACL permission")
        u = self.server.users.get(user)
        if u is None:
            raise NotFoundError("redis", f"ACL GETUSER {user}", "no such ACL user")
        return u

    def user(self, user: str) -> AclUser:
        u = self._check(user)
        return AclUser(user, u.enabled, u.nopass, len(u.passwords))

    def add_password(self, user: str, password: Secret) -> None:
        u = self._check(user)
        u.nopass = False  # as Redis: >pw clears nopass
        if password.reveal() not in u.passwords:
            u.passwords.append(password.reveal())

    def remove_password(self, user: str, password: Secret) -> None:
        u = self._check(user)
        if password.reveal() in u.passwords:
            u.passwords.remove(password.reveal())

    def set_only_password(self, user: str, password: Secret) -> None:
        u = self._check(user)
        u.nopass = False
        u.passwords[:] = [password.reveal()]

    def auth_ok(self, user: str, password: Secret) -> bool:
        return self.server.accepts(user, password)

    def close(self) -> None:
        return None


# --------------------------------------------------------------------------- postgres


@dataclass
class FakeRole:
    verifier: str | None = None
    login: bool = True
    superuser: bool = False
    createrole: bool = False
    member_of: set[str] = field(default_factory=set)
    sessions: int = 0


@dataclass
class FakePostgresServer:
    roles: dict[str, FakeRole] = field(default_factory=dict)
    statements: list[str] = field(default_factory=list)
    down: bool = False
    endpoint: Endpoint = ENDPOINT

    def add_role(self, name: str, password: str | None, **kw: object) -> FakeRole:
        role = FakeRole(stand_in_verifier(Secret(password)) if password else None, **kw)  # type: ignore[arg-type]
        self.roles[name] = role
        return role

    def accepts(self, user: str, password: Secret) -> bool:
        if self.down:
            raise TemporaryError("postgres", f"log in as {user}", "unreachable")
        role = self.roles.get(user)
        if role is None or not role.login or role.verifier is None:
            return False
        return stand_in_verifier(password) == role.verifier


class FakePostgresRoles:
    def __init__(self, server: FakePostgresServer, admin_user: str, password: Secret) -> None:
        if not server.accepts(admin_user, password):
            raise ForbiddenError("postgres", f"connect as {admin_user}", "login refused")
        self.server = server
        self._admin = admin_user

    @property
    def endpoint(self) -> Endpoint:
        return self.server.endpoint

    def _role(self, role: str) -> FakeRole:
        if self.server.down:
            raise TemporaryError("postgres", f"role {role}", "unreachable")
        found = self.server.roles.get(role)
        if found is None:
            raise NotFoundError("postgres", f"role {role}", "no such role (SQLSTATE 42704)")
        return found

    def role(self, role: str) -> RoleState:
        return RoleState(role, self._role(role).login)

    def role_exists(self, role: str) -> bool:
        return role in self.server.roles

    def can_alter(self, role: str) -> bool:
        me, target = self.server.roles[self._admin], self.server.roles.get(role)
        if target is None:
            return False
        return me.superuser or role == self._admin or (me.createrole and not target.superuser)

    def grants(self, role: str) -> GrantsProfile:
        r = self._role(role)
        attrs = {"rolsuper"} if r.superuser else set()
        return GrantsProfile(role, frozenset(r.member_of), frozenset(attrs), frozenset())

    def set_password(self, role: str, password: Secret) -> None:
        verifier = stand_in_verifier(password)
        target = self._role(role)
        if not self.can_alter(role):
            raise ForbiddenError("postgres", f"set the password of {role}", "insufficient")
        self.server.statements.append(f"ALTER ROLE \"{role}\" PASSWORD '{verifier}'")
        target.verifier = verifier

    def set_login(self, role: str, login: bool) -> None:
        target = self._role(role)
        self.server.statements.append(f"ALTER ROLE \"{role}\" {'LOGIN' if login else 'NOLOGIN'}")
        target.login = login

    def sessions(self, role: str) -> int:
        return self._role(role).sessions

    def login_ok(self, user: str, password: Secret) -> bool:
        return self.server.accepts(user, password)

    def close(self) -> None:
        return None


# --------------------------------------------------------------------------- probes, connector


class FakeProbe:
    def __init__(self, server: FakeRedisServer | FakePostgresServer) -> None:
        self.server = server

    @property
    def endpoint(self) -> Endpoint:
        return self.server.endpoint

    def accepts(self, user: str, password: Secret) -> bool:
        return self.server.accepts(user, password)


@dataclass
class FakeConnector:
    redis: FakeRedisServer = field(default_factory=FakeRedisServer)
    postgres: FakePostgresServer = field(default_factory=FakePostgresServer)

    def redis_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                    tls: bool) -> RedisAclAdmin:
        return FakeRedisAcl(self.redis, user, password)

    def postgres_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                       database: str, sslmode: str) -> PostgresAdmin:
        return FakePostgresRoles(self.postgres, user, password)

    def redis_probe(self, endpoint: Endpoint, *, tls: bool) -> AuthProbe:
        return FakeProbe(self.redis)

    def postgres_probe(self, endpoint: Endpoint, *, database: str,
                       sslmode: str) -> AuthProbe:
        return FakeProbe(self.postgres)
