"""The live PostgreSQL role adapter (psycopg 3): one admin session, fresh login probes.

Invariants:

* A password never reaches the server as text.  :meth:`PostgresRoles.set_password` sends a
  SCRAM-SHA-256 verifier that libpq computes on the admin connection
  (``PQencryptPasswordConn``, as ``psql \\password`` does; it follows the server's
  ``scram_iterations``), and refuses to send anything that is not one, so no statement a
  server log records holds the password.  rotate implements no cryptography of its own.
  The role is sent as an identifier (``psycopg.sql.Identifier``); the verifier must be a
  literal, because ``ALTER ROLE`` is a utility statement that takes no bind parameters.
* Passwords cross the wire only in the authentication exchange (libpq does SCRAM itself; the
  password is a connection keyword, never a conninfo string we build or show).
* No psycopg exception text is kept (it can hold conninfo or server messages); failures are
  translated by SQLSTATE class into :mod:`rotate.core.errors` types.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from rotate.clients.provider_seams import GrantsProfile, RoleState
from rotate.clients.seams import Endpoint
from rotate.core.errors import (
    ClientError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    RejectedError,
    TemporaryError,
)
from rotate.core.secret import Secret

SYSTEM = "postgres"
#: how every SCRAM-SHA-256 verifier starts (``SCRAM-SHA-256$<iterations>:<salt>$…``)
SCRAM_PREFIX = "SCRAM-SHA-256$"

#: SQLSTATEs meaning "the server refused this login" (not: "the server is unreachable").
LOGIN_REFUSED = frozenset({"28P01", "28000"})
_TEMPORARY_CLASSES = ("08", "53", "57")  # connection exception, resources, operator intervention

_ATTRIBUTES = ("rolsuper", "rolinherit", "rolcreaterole", "rolcreatedb", "rolreplication",
               "rolbypassrls")


def _sqlstate(exc: psycopg.Error) -> str | None:
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None


@contextmanager
def translated(operation: str) -> Iterator[None]:
    """Map psycopg exceptions to ClientError by SQLSTATE; their text never leaves."""
    try:
        yield
    except ClientError:
        raise
    except psycopg.Error as exc:
        raise _translate(exc, operation) from None
    except OSError:
        raise TemporaryError(SYSTEM, operation, "unreachable") from None


def _translate(exc: psycopg.Error, operation: str) -> ClientError:
    state = _sqlstate(exc)
    if state in LOGIN_REFUSED:
        return ForbiddenError(SYSTEM, operation, f"login refused (SQLSTATE {state})")
    if state == "42501":
        return ForbiddenError(SYSTEM, operation, "insufficient privilege (SQLSTATE 42501)")
    if state == "42704":
        return NotFoundError(SYSTEM, operation, "no such role (SQLSTATE 42704)")
    if state is None and isinstance(exc, psycopg.OperationalError):
        # A failed connection carries no SQLSTATE (libpq keeps only the message text, which
        # we do not parse: it is localised and names the user). libpq's used_password says
        # whether the server got as far as checking the password: then it refused the login
        # (wrong password, unknown role, NOLOGIN, or no CONNECT on the database).
        pgconn = getattr(exc, "pgconn", None)
        if pgconn is not None and bool(getattr(pgconn, "used_password", False)):
            return ForbiddenError(SYSTEM, operation, "login refused")
        return TemporaryError(SYSTEM, operation, "unreachable")
    if state is not None and state.startswith(_TEMPORARY_CLASSES):
        return TemporaryError(SYSTEM, operation, f"unavailable (SQLSTATE {state})")
    suffix = f" (SQLSTATE {state})" if state else ""
    return PermanentError(SYSTEM, operation, f"failed{suffix}")


def _connect(endpoint: Endpoint, user: str, password: Secret, *, database: str,
             sslmode: str, timeout: float) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=endpoint.host, port=endpoint.port, user=user, password=password.reveal(),
        dbname=database, sslmode=sslmode, connect_timeout=max(1, int(timeout)),
        application_name="rotate", autocommit=True,
        passfile="/dev/null",  # only the password given here, never ~/.pgpass
    )


class PostgresRoles:
    """An authenticated admin session (``connect`` raises ForbiddenError when refused)."""

    def __init__(self, conn: psycopg.Connection[Any], endpoint: Endpoint, *, database: str,
                 sslmode: str, timeout: float) -> None:
        self._conn = conn
        self._endpoint = endpoint
        self._database = database
        self._sslmode = sslmode
        self._timeout = timeout

    @classmethod
    def connect(cls, endpoint: Endpoint, admin_user: str, admin_password: Secret, *,
                database: str = "postgres", sslmode: str = "prefer",
                timeout: float = 5.0) -> PostgresRoles:
        with translated(f"connect to {endpoint} as {admin_user}"):
            conn = _connect(endpoint, admin_user, admin_password, database=database,
                            sslmode=sslmode, timeout=timeout)
        return cls(conn, endpoint, database=database, sslmode=sslmode, timeout=timeout)

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def _rows(self, operation: str, query: sql.Composed | sql.SQL | LiteralString,
              params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with translated(operation), self._conn.cursor() as cur:
            cur.execute(query, params or None)
            return list(cur.fetchall()) if cur.description is not None else []

    def role(self, role: str) -> RoleState:
        rows = self._rows(f"read role {role}",
                          "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (role,))
        if not rows:
            raise NotFoundError(SYSTEM, f"read role {role}", "no such role")
        return RoleState(role, bool(rows[0][0]))

    def role_exists(self, role: str) -> bool:
        return bool(self._rows(f"look up role {role}",
                               "SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)))

    def can_alter(self, role: str) -> bool:
        """Superuser; or the role itself; or CREATEROLE (which, from PostgreSQL 16 on, also
        needs ADMIN OPTION on the role; a superuser target needs a superuser admin)."""
        rows = self._rows(
            f"check privileges on role {role}",
            "SELECT me.rolsuper, me.rolcreaterole, me.rolname = t.rolname, t.rolsuper, "
            "current_setting('server_version_num')::int, "
            "pg_has_role(me.oid, t.oid, 'MEMBER WITH ADMIN OPTION') "
            "FROM pg_roles me, pg_roles t "
            "WHERE me.rolname = current_user AND t.rolname = %s", (role,))
        if not rows:
            return False
        superuser, createrole, is_self, target_super, version, admin_option = rows[0]
        if superuser or is_self:
            return True
        if target_super or not createrole:
            return False
        return bool(version < 160000 or admin_option)

    def grants(self, role: str) -> GrantsProfile:
        attrs = self._rows(f"read role {role}",
                           sql.SQL("SELECT {} FROM pg_roles WHERE rolname = %s").format(
                               sql.SQL(", ").join(map(sql.Identifier, _ATTRIBUTES))), (role,))
        if not attrs:
            raise NotFoundError(SYSTEM, f"read role {role}", "no such role")
        member_of = self._rows(
            f"read memberships of {role}",
            "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
            "JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = %s", (role,))
        privileges = self._rows(f"read privileges of {role}", _PRIVILEGES, (role,) * 3)
        return GrantsProfile(
            role=role,
            member_of=frozenset(str(r[0]) for r in member_of),
            attributes=frozenset(a for a, on in zip(_ATTRIBUTES, attrs[0], strict=True) if on),
            privileges=frozenset((str(k), str(o), str(p)) for k, o, p in privileges),
        )

    def set_password(self, role: str, password: Secret) -> None:
        operation = f"set the password of {role}"
        with translated(operation):
            verifier = self._conn.pgconn.encrypt_password(
                password.reveal().encode(), role.encode(), b"scram-sha-256").decode("ascii")
        if not verifier.startswith(SCRAM_PREFIX):
            raise RejectedError(SYSTEM, operation, "libpq did not compute a SCRAM-SHA-256 "
                                "verifier; nothing was sent")
        self._rows(operation,
                   sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role),
                                                               sql.Literal(verifier)))

    def set_login(self, role: str, login: bool) -> None:
        self._rows(f"{'enable' if login else 'disable'} login of {role}",
                   sql.SQL("ALTER ROLE {} " + ("LOGIN" if login else "NOLOGIN")).format(
                       sql.Identifier(role)))

    def sessions(self, role: str) -> int:
        rows = self._rows(f"count sessions of {role}",
                          "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (role,))
        return int(rows[0][0]) if rows else 0

    def login_ok(self, user: str, password: Secret) -> bool:
        return PostgresLoginProbe(self._endpoint, database=self._database,
                                  sslmode=self._sslmode, timeout=self._timeout).accepts(
            user, password)

    def close(self) -> None:
        with suppress(psycopg.Error):
            self._conn.close()


class PostgresLoginProbe:
    """A real login from outside: a fresh connection per call, closed at once."""

    def __init__(self, endpoint: Endpoint, *, database: str = "postgres",
                 sslmode: str = "prefer", timeout: float = 5.0) -> None:
        self._endpoint = endpoint
        self._database = database
        self._sslmode = sslmode
        self._timeout = timeout

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    def accepts(self, user: str, password: Secret) -> bool:
        """True: logged in; False: refused (wrong password, unknown role, NOLOGIN, no CONNECT
        on the database); TemporaryError when the server cannot be reached."""
        try:
            with translated(f"log in as {user} at {self._endpoint}"):
                conn = _connect(self._endpoint, user, password, database=self._database,
                                sslmode=self._sslmode, timeout=self._timeout)
                conn.close()
            return True
        except ForbiddenError:
            return False


#: Privileges granted directly to a role on databases, schemas and relations (aclexplode).
_PRIVILEGES = """
SELECT 'database', d.datname, a.privilege_type
  FROM pg_database d, aclexplode(d.datacl) a JOIN pg_roles r ON r.oid = a.grantee
 WHERE r.rolname = %s
UNION
SELECT 'schema', n.nspname, a.privilege_type
  FROM pg_namespace n, aclexplode(n.nspacl) a JOIN pg_roles r ON r.oid = a.grantee
 WHERE r.rolname = %s
UNION
SELECT 'relation', c.oid::regclass::text, a.privilege_type
  FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
 WHERE r.rolname = %s
"""
