"""The sample service's PostgreSQL client: a fresh psycopg 3 login per check and per /work.

Kept apart from :mod:`rotate_lab.shop.sample_service` so that only the services whose
bootstrap document has a ``postgres`` section import psycopg.  A fresh login each time (no
pool) is deliberate: it is what proves, at every readiness check, that the server accepts the
password the document carries — the property a rotation has to keep.

Like a well-built production client (a pool's reconnect, SQLAlchemy's ``is_disconnect``), it
rides out a *server restart* and never hides a *refusal*:

- ``/work`` retries a login or query that failed because the connection was refused, dropped
  or the server was starting/shutting down (:func:`is_transient`), with a short back-off,
  until :data:`RETRY_WINDOW` seconds after the request began — the request's deadline;
- ``/readyz`` (one attempt: the kubelet's probe times out after 1 s) still answers ready
  after such a failure while the last successful login is less than :data:`RETRY_WINDOW`
  seconds old: a request now would succeed within its deadline, so taking every replica out
  of its Service during a database restart (readiness ``failureThreshold: 1``) would only turn
  a short wait into "no endpoints available".  A pod that never logged in is never ready this
  way, so a consumer prepared with a password the server does not hold stays unready;
- anything else — an authentication failure above all (``password authentication failed``,
  ``NOLOGIN``, ``pg_hba``), a missing table — fails at once and is never retried: a rotated
  password that the server does not hold shows at the next request and the next probe.

psycopg is imported at the first login, not at start: the HTTP server (and so the liveness
probe) must answer within the lab's first probe periods, before a slow import completes.

Errors are reported by SQLSTATE or exception class only: libpq's messages name the user and
the host, and a message must never risk carrying the password.  libpq gives no SQLSTATE for a
failed *connection* (the server's FATAL is only text), so :func:`is_transient` matches the
message against a short allow-list of connection-level phrases; whatever it does not know is
treated as permanent (shown, not retried).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

IO_TIMEOUT = 2
#: seconds a request may spend riding out a restart; also readyz's grace after a last login
RETRY_WINDOW = float(os.environ.get("LAB_PG_RETRY_SECONDS", "5"))
_BACKOFF_FIRST, _BACKOFF_MAX = 0.05, 0.5

#: SQLSTATEs of a server going away or not yet there (class 08, admin/crash shutdown, 57P03)
_TRANSIENT_STATES = ("57P01", "57P02", "57P03")
#: libpq/server phrases of a connection that failed for transport reasons, never for a
#: credential (a refusal reads "password authentication failed", "not permitted to log in")
_TRANSIENT_PHRASES = (
    "connection refused",
    "could not connect",
    "server closed the connection",
    "connection reset",
    "no connection to the server",
    "timeout expired",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "terminating connection due to administrator command",
    "ssl syscall error",
    "eof detected",
)


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` says the server was unreachable or restarting — worth one more try."""
    import psycopg

    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state:
        return state.startswith("08") or state in _TRANSIENT_STATES
    if not isinstance(exc, psycopg.OperationalError):
        return False
    text = str(exc).lower()
    return any(phrase in text for phrase in _TRANSIENT_PHRASES)


class Postgres:
    def __init__(self, section: dict[str, Any], resolve: Callable[[str], str]) -> None:
        self.host = str(section.get("host") or "")
        self.port = int(section.get("port") or 5432)
        self.user = str(section.get("user") or "")
        self._password = str(section.get("password") or "")
        self.database = str(section.get("database") or "")
        if not (self.host and self.user and self.database):
            raise ValueError("postgres section needs host, user and database")
        self._resolve = resolve
        self._lock = threading.Lock()
        self._last_login: float | None = None  # monotonic time of the last successful login

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        return psycopg.connect(host=self._resolve(self.host), port=self.port, user=self.user,
                               password=self._password, dbname=self.database,
                               connect_timeout=IO_TIMEOUT, application_name="shop-service",
                               autocommit=True)

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """One login + one query; returns the first row's first column."""
        with self._connect() as conn:
            with self._lock:
                self._last_login = time.monotonic()
            row = conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def _run_until(self, deadline: float, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """:meth:`_run`, again after a transient failure while ``deadline`` allows."""
        delay = _BACKOFF_FIRST
        while True:
            try:
                return self._run(sql, params)
            except Exception as exc:
                if not is_transient(exc) or time.monotonic() + delay >= deadline:
                    raise
            time.sleep(delay)  # client reconnect back-off, as a pool's reconnect does
            delay = min(_BACKOFF_MAX, delay * 2)

    def _recently_logged_in(self) -> bool:
        with self._lock:
            last = self._last_login
        return last is not None and time.monotonic() - last < RETRY_WINDOW

    def check(self) -> str | None:
        """None when a fresh login and ``SELECT 1`` succeed (or the server is restarting and
        the last login is recent, see the module doc), else a reason (no secret)."""
        import psycopg

        try:
            if self._run("SELECT 1") != 1:
                return "postgres: SELECT 1 returned something else"
        except psycopg.Error as exc:
            if is_transient(exc) and self._recently_logged_in():
                return None
            return f"postgres: {_describe(exc)}"
        return None

    def work(self, n: int) -> str | None:
        """A real read of the seeded table, riding out a restart until the request's deadline."""
        import psycopg

        try:
            name = self._run_until(time.monotonic() + RETRY_WINDOW,
                                   "SELECT name FROM products WHERE id = %s", (n % 3 + 1,))
        except psycopg.Error as exc:
            return f"postgres: {_describe(exc)}"
        return None if name else "postgres: products row missing"


def _describe(exc: psycopg.Error) -> str:
    code = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__}{f' (SQLSTATE {code})' if code else ''}"
