"""The seams to providers that hold their own password: a Redis/Dragonfly ACL user and a
PostgreSQL role are changed live over an admin connection.  Real adapters:

* :class:`RedisAclAdmin`     — ``rotate.clients.redis_acl.RedisAcl`` (redis-py)
* :class:`PostgresAdmin`     — ``rotate.clients.postgres.PostgresRoles`` (psycopg 3)
* :class:`ProviderConnector` — ``rotate.clients.provider_connect.Connector``, which opens them

The "from outside" probes (``auth_ok``/``login_ok``, :class:`AuthProbe`) open a fresh
connection with the candidate value and report whether the server accepted it: False means
refused (wrong password, NOLOGIN, unknown user), never "unreachable" — that is a
TemporaryError.  The contract of rotate.clients.seams holds here too: only ClientError
subclasses are raised, and a password crosses the seam only as Secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rotate.clients.seams import Endpoint
from rotate.core.secret import Secret


class AuthProbe(Protocol):
    """Authentication from outside, the way a consumer connecting now would see it."""

    @property
    def endpoint(self) -> Endpoint: ...

    def accepts(self, user: str, password: Secret) -> bool:
        """A fresh connection authenticating as ``user``: True accepted, False refused;
        TemporaryError when the server cannot be reached."""


@dataclass(frozen=True)
class AclUser:
    """What ``ACL GETUSER`` says about one user (never the password hashes themselves)."""

    name: str
    enabled: bool
    nopass: bool
    password_count: int


class RedisAclAdmin(Protocol):
    """An authenticated admin connection to one Redis/Dragonfly server.

    Every change raises NotFoundError for a user that does not exist (``ACL SETUSER`` alone
    would create it, disabled): rotate never creates accounts."""

    @property
    def endpoint(self) -> Endpoint: ...

    def user(self, user: str) -> AclUser:
        """NotFoundError when the ACL user does not exist; ForbiddenError without +acl."""

    def add_password(self, user: str, password: Secret) -> None:
        """``ACL SETUSER user >pw``: the user accepts ``password`` as well (idempotent)."""

    def remove_password(self, user: str, password: Secret) -> None:
        """``ACL SETUSER user <pw``; a password the user does not hold is not an error."""

    def set_only_password(self, user: str, password: Secret) -> None:
        """``ACL SETUSER user resetpass >pw``: ``password`` becomes the only one."""

    def auth_ok(self, user: str, password: Secret) -> bool:
        """A fresh connection doing ``AUTH user pw``: True accepted, False refused."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class RoleState:
    """``pg_roles`` facts about one role (rolpassword is never read: not even the verifier
    leaves the server)."""

    name: str
    can_login: bool


@dataclass(frozen=True)
class GrantsProfile:
    """What a role can do, to compare the two roles of alternating users.

    ``member_of``: granted roles; ``attributes``: rolsuper, rolinherit, rolcreaterole,
    rolcreatedb, rolreplication, rolbypassrls that are true; ``privileges``: (object kind,
    object name, privilege) granted directly to the role on databases, schemas, relations.
    """

    role: str
    member_of: frozenset[str]
    attributes: frozenset[str]
    privileges: frozenset[tuple[str, str, str]]

    def differences(self, other: GrantsProfile) -> list[str]:
        """Human lines naming what one role has and the other lacks (names only)."""
        out: list[str] = []
        for label, mine, theirs in (
            ("member of", self.member_of, other.member_of),
            ("attribute", self.attributes, other.attributes),
            ("privilege", {" ".join(p) for p in self.privileges},
             {" ".join(p) for p in other.privileges}),
        ):
            for item in sorted(set(mine) - set(theirs)):
                out.append(f"{self.role} has {label} {item}, {other.role} does not")
            for item in sorted(set(theirs) - set(mine)):
                out.append(f"{other.role} has {label} {item}, {self.role} does not")
        return out


class PostgresAdmin(Protocol):
    """An authenticated admin session on one PostgreSQL server."""

    @property
    def endpoint(self) -> Endpoint: ...

    def role(self, role: str) -> RoleState:
        """NotFoundError when the role does not exist."""

    def role_exists(self, role: str) -> bool: ...

    def can_alter(self, role: str) -> bool:
        """Whether this session may change ``role``'s password and LOGIN (observes only)."""

    def grants(self, role: str) -> GrantsProfile: ...

    def set_password(self, role: str, password: Secret) -> None:
        """``ALTER ROLE role PASSWORD 'SCRAM-SHA-256$…'``: only a verifier crosses the wire,
        computed by the driver (libpq) on this session; never the password as text."""

    def set_login(self, role: str, login: bool) -> None:
        """``ALTER ROLE role LOGIN`` / ``NOLOGIN`` (existing sessions are not ended)."""

    def sessions(self, role: str) -> int:
        """How many backends are connected as ``role`` now (pg_stat_activity)."""

    def login_ok(self, user: str, password: Secret) -> bool:
        """A fresh login as ``user`` from outside: True accepted, False refused."""

    def close(self) -> None: ...


class ProviderConnector(Protocol):
    """Opens provider connections (real: ``rotate.clients.provider_connect.Connector``).

    Admin sessions raise ForbiddenError when the admin credential is refused and
    TemporaryError when the provider is unreachable.
    """

    def redis_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                    tls: bool) -> RedisAclAdmin: ...

    def postgres_admin(self, endpoint: Endpoint, user: str, password: Secret, *,
                       database: str, sslmode: str) -> PostgresAdmin: ...

    def redis_probe(self, endpoint: Endpoint, *, tls: bool) -> AuthProbe: ...

    def postgres_probe(self, endpoint: Endpoint, *, database: str,
                       sslmode: str) -> AuthProbe: ...
