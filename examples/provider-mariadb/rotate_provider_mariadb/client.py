"""The MariaDB side of the plug-in: an admin session and fresh login probes (PyMySQL).

Invariants:

* A password never reaches the server as text: :meth:`MariaDbAdmin.set_password` sends
  ``ALTER USER … IDENTIFIED BY PASSWORD '*…'``, the mysql_native_password hash computed on
  the client by libpass (``passlib.hash.mysql41``), so a general or slow query log records the
  hash, never the password.  The password itself crosses the wire only inside the
  authentication handshake of a login (PyMySQL's scramble).
* No PyMySQL exception text is kept (it can hold statements and server messages): failures
  are translated by MariaDB error number into :mod:`rotate.core.errors` types.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pymysql
from passlib.hash import mysql41

from rotate.clients.seams import Endpoint
from rotate.core.errors import (
    ClientError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    TemporaryError,
)
from rotate.core.secret import Secret

SYSTEM = "mysql"
#: errors meaning "the server refused this login": access denied, account locked, password
#: expired, no such database for this account
LOGIN_REFUSED = frozenset({1044, 1045, 1862, 3118, 4151})
#: client-side "cannot reach the server" (2003 cannot connect, 2006 gone away, 2013 lost)
UNREACHABLE = frozenset({2002, 2003, 2006, 2013})
NO_SUCH_USER = frozenset({1396})  # ALTER USER on an account that does not exist
NO_PRIVILEGE = frozenset({1142, 1227, 1370})


def native_hash(password: Secret) -> str:
    """The mysql_native_password hash (``*`` + 40 hex digits) of ``password``, by libpass."""
    digest: str = mysql41.hash(password.reveal())
    return digest


@contextmanager
def translated(operation: str) -> Iterator[None]:
    """PyMySQL's exceptions as rotate's, by error number; their text never leaves."""
    try:
        yield
    except ClientError:
        raise
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        if code in LOGIN_REFUSED:
            raise ForbiddenError(SYSTEM, operation, f"login refused (error {code})") from None
        if code in NO_PRIVILEGE:
            raise ForbiddenError(SYSTEM, operation,
                                 f"insufficient privilege (error {code})") from None
        if code in NO_SUCH_USER:
            raise NotFoundError(SYSTEM, operation, f"no such account (error {code})") from None
        if code in UNREACHABLE or code is None:
            raise TemporaryError(SYSTEM, operation, "unreachable") from None
        raise PermanentError(SYSTEM, operation, f"failed (error {code})") from None
    except OSError:
        raise TemporaryError(SYSTEM, operation, "unreachable") from None


def _connect(endpoint: Endpoint, user: str, password: Secret, timeout: float) -> Any:
    """Every wait bounded: PyMySQL's ``connect_timeout`` covers only the TCP connect, and a
    hung server (frozen, not refusing) accepts it and then never greets — without a read
    timeout the handshake, and so the step, would wait forever past its deadline."""
    seconds = max(1, int(timeout))
    return pymysql.connect(host=endpoint.host, port=endpoint.port, user=user,
                           password=password.reveal(), connect_timeout=seconds,
                           read_timeout=seconds, write_timeout=seconds,
                           autocommit=True, read_default_file=None)


class MariaDbAdmin:
    """An authenticated admin session (``connect`` raises ForbiddenError when refused)."""

    def __init__(self, conn: Any, endpoint: Endpoint, timeout: float) -> None:
        self._conn = conn
        self.endpoint = endpoint
        self._timeout = timeout

    @classmethod
    def connect(cls, endpoint: Endpoint, user: str, password: Secret,
                timeout: float = 5.0) -> MariaDbAdmin:
        with translated(f"connect to {endpoint} as {user}"):
            conn = _connect(endpoint, user, password, timeout)
        return cls(conn, endpoint, timeout)

    def _rows(self, operation: str, statement: str,
              params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with translated(operation), self._conn.cursor() as cur:
            cur.execute(statement, params or None)
            return list(cur.fetchall())

    def exists(self, user: str, host: str) -> bool:
        return bool(self._rows(f"look up account {user}",
                               "SELECT 1 FROM mysql.user WHERE User = %s AND Host = %s",
                               (user, host)))

    def locked(self, user: str, host: str) -> bool:
        """Whether the account is ``ACCOUNT LOCK``ed (read from SHOW CREATE USER; the hash in
        that text is looked at for nothing else and kept nowhere)."""
        rows = self._rows(f"read account {user}", "SHOW CREATE USER %s@%s", (user, host))
        return bool(rows) and "ACCOUNT LOCK" in str(rows[0][0])

    def may_alter_users(self) -> bool:
        """Global CREATE USER (or ALL PRIVILEGES): what ALTER USER of another account needs."""
        grants = " ".join(str(r[0]) for r in self._rows("read the admin's grants",
                                                          "SHOW GRANTS"))
        return "ON *.*" in grants and ("ALL PRIVILEGES" in grants or "CREATE USER" in grants)

    def grants(self, user: str, host: str) -> frozenset[str]:
        """The account's grants, its own name and any password clause taken out, so two
        accounts with the same rights compare equal."""
        rows = self._rows(f"read grants of {user}", "SHOW GRANTS FOR %s@%s", (user, host))
        out = set()
        for (line,) in rows:
            text = str(line).split(" IDENTIFIED BY", 1)[0]
            out.add(text.replace(f"`{user}`@`{host}`", "<account>"))
        return frozenset(out)

    def set_password(self, user: str, host: str, password: Secret) -> None:
        self._rows(f"set the password of {user}",
                   "ALTER USER %s@%s IDENTIFIED BY PASSWORD %s",
                   (user, host, native_hash(password)))

    def set_locked(self, user: str, host: str, locked: bool) -> None:
        self._rows(f"{'lock' if locked else 'unlock'} account {user}",
                   f"ALTER USER %s@%s ACCOUNT {'LOCK' if locked else 'UNLOCK'}", (user, host))

    def sessions(self, user: str) -> int:
        rows = self._rows(f"count sessions of {user}",
                          "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s",
                          (user,))
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        with suppress(Exception):
            self._conn.close()


class MariaDbProbe:
    """A real login from outside: a fresh connection per call, closed at once."""

    def __init__(self, endpoint: Endpoint, timeout: float = 5.0) -> None:
        self.endpoint = endpoint
        self._timeout = timeout

    def accepts(self, user: str, password: Secret) -> bool:
        """True: logged in; False: refused (wrong password, locked, unknown account);
        TemporaryError when the server cannot be reached."""
        try:
            with translated(f"log in as {user} at {self.endpoint}"):
                _connect(self.endpoint, user, password, self._timeout).close()
            return True
        except ForbiddenError:
            return False
