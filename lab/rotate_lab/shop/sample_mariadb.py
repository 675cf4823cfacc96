"""The sample service's MariaDB client: a fresh PyMySQL login per check and per /work.

Kept apart from :mod:`rotate_lab.shop.sample_service` so that only a service whose document
has a ``mariadb`` section (``MARIADB_HOST`` in its env: ``catalog`` of ``rotate lab up --with
mariadb``) imports PyMySQL, at its first login.  A fresh login each time (no pool) proves, at
every readiness check and request, that the server accepts the account and password the
service started with — an account ``ACCOUNT LOCK``ed or a password the server no longer holds
fails the very next request.  Errors are reported by class and MySQL error number only: a
server message names the account and host, and must never risk carrying a secret.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

IO_TIMEOUT = 4  # seconds: a login on a loaded 2-core machine, within a request's 5 s


class MariaDb:
    def __init__(self, section: dict[str, Any], resolve: Callable[[str], str]) -> None:
        self.host = str(section.get("host") or "")
        self.port = int(section.get("port") or 3306)
        self.user = str(section.get("user") or "")
        self._password = str(section.get("password") or "")
        self.database = str(section.get("database") or "")
        if not (self.host and self.user and self.database):
            raise ValueError("mariadb section needs host, user and database")
        self._resolve = resolve

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """One login + one query; the first row's first column."""
        import pymysql

        conn = pymysql.connect(host=self._resolve(self.host), port=self.port, user=self.user,
                               password=self._password, database=self.database,
                               connect_timeout=IO_TIMEOUT, read_timeout=IO_TIMEOUT,
                               write_timeout=IO_TIMEOUT, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params or None)
                row = cur.fetchone()
        finally:
            conn.close()
        return None if row is None else row[0]

    def check(self) -> str | None:
        """None when a fresh login and ``SELECT 1`` succeed, else a reason (no secret)."""
        import pymysql

        try:
            return None if self._run("SELECT 1") == 1 else "mariadb: SELECT 1 returned " \
                                                            "something else"
        except pymysql.Error as exc:
            return f"mariadb: {_describe(exc)}"

    def work(self, n: int) -> str | None:
        """A real read of the seeded table on a fresh login."""
        import pymysql

        try:
            name = self._run("SELECT name FROM items WHERE id = %s", (n % 3 + 1,))
        except pymysql.Error as exc:
            return f"mariadb: {_describe(exc)}"
        return None if name else "mariadb: items row missing"


def _describe(exc: Exception) -> str:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    return f"{type(exc).__name__}{f' (error {code})' if code else ''}"
