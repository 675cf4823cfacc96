"""The sample service's PostgreSQL client: a fresh psycopg 3 login per check and per /work.

Kept apart from :mod:`rotate_lab.services.sample_service` so that only the services whose
bootstrap document has a ``postgres`` section import psycopg.  A fresh login each time (no
pool) is deliberate: it is what proves, at every readiness check, that the server accepts the
password the document carries — the property a rotation has to keep.

psycopg is imported at the first login, not at start: the HTTP server (and so the liveness
probe) must answer within the lab's first probe periods, before a slow import completes.

Errors are reported by SQLSTATE or exception class only: libpq's messages name the user and
the host, and a message must never risk carrying the password.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

IO_TIMEOUT = 2


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

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        return psycopg.connect(host=self._resolve(self.host), port=self.port, user=self.user,
                               password=self._password, dbname=self.database,
                               connect_timeout=IO_TIMEOUT, application_name="shop-service",
                               autocommit=True)

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """One login + one query; returns the first row's first column."""
        with self._connect() as conn:
            row = conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def check(self) -> str | None:
        """None when a fresh login and ``SELECT 1`` succeed, else a reason (no secret)."""
        import psycopg

        try:
            if self._run("SELECT 1") != 1:
                return "postgres: SELECT 1 returned something else"
        except psycopg.Error as exc:
            return f"postgres: {_describe(exc)}"
        return None

    def work(self, n: int) -> str | None:
        """A real read of the seeded table."""
        import psycopg

        try:
            name = self._run("SELECT name FROM products WHERE id = %s", (n % 3 + 1,))
        except psycopg.Error as exc:
            return f"postgres: {_describe(exc)}"
        return None if name else "postgres: products row missing"


def _describe(exc: psycopg.Error) -> str:
    code = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__}{f' (SQLSTATE {code})' if code else ''}"
