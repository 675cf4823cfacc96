"""Where the sample service's document comes from (:mod:`rotate_lab.shop.sample_service`):
the Config Center's ``/v1/bootstrap`` (its machine token), or, for a workload that reads its
Secret itself, its own environment.

Invariants, and why:

- The document is read *once*, at start, as the real services do: a rotated password
  reaches a service only through a restart, the very thing a rotation orchestrates.
- At start the fetch is retried until a short deadline, then the process exits 1 with one
  log line naming why (HTTP status, token rejected, unreachable): a pod that cannot
  bootstrap crash-loops visibly instead of serving without its configuration.
- The token and the document's values never appear in a log line or an exception's text.
- Standard library only (a pod starts in well under a second); names are resolved with the
  lab's resolver the caller gives.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

IO_TIMEOUT = 2.0


class ConfigCenter:
    """The service's Config Center: ``GET /v1/bootstrap`` with its machine token."""

    def __init__(self, url: str, token: str, resolve: Callable[[str], str]) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("CONFIG_CENTER_URL must be an http(s) URL")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base = parts.path.rstrip("/")
        self._token = token
        self._resolve = resolve

    def get_bootstrap(self) -> tuple[int, Any]:
        """(status, parsed body or None). Raises OSError when unreachable."""
        addr = self._resolve(self.host)
        conn: http.client.HTTPConnection
        if self.scheme == "https":
            conn = http.client.HTTPSConnection(addr, self.port, timeout=IO_TIMEOUT)
        else:
            conn = http.client.HTTPConnection(addr, self.port, timeout=IO_TIMEOUT)
        try:
            conn.request("GET", self.base + "/v1/bootstrap", headers={
                "Authorization": f"Bearer {self._token}",
                "Host": f"{self.host}:{self.port}",
                "Accept": "application/json",
            })
            resp = conn.getresponse()
            raw = resp.read()
        except http.client.HTTPException as exc:
            raise OSError("bad HTTP response") from exc
        finally:
            conn.close()
        body: Any = None
        if resp.status == 200:
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise OSError("bootstrap document is not JSON") from exc
        return resp.status, body


def unwrap(body: Any) -> dict[str, Any]:
    """Accept the document itself or a ``{"value": doc, "version": n}`` envelope."""
    if isinstance(body, dict) and isinstance(body.get("value"), dict) and "version" in body:
        return dict(body["value"])
    if not isinstance(body, dict):
        raise ValueError("bootstrap document is not a JSON object")
    return body


def fetch_bootstrap(cc: ConfigCenter, deadline: float,
                    log: Callable[[str], None]) -> dict[str, Any]:
    """Retry until ``deadline``; raises SystemExit(1) with a clear log line otherwise."""
    last = "no attempt"
    delay = 0.1
    while True:
        try:
            status, body = cc.get_bootstrap()
            if status == 200:
                return unwrap(body)
            last = f"HTTP {status}"
            if status in (401, 403):
                last += " (machine token rejected)"
        except (OSError, ValueError) as exc:
            last = str(exc) if isinstance(exc, ValueError) else "config center unreachable"
        if time.monotonic() + delay > deadline:
            log(f"bootstrap failed: {last}; giving up")
            raise SystemExit(1)
        time.sleep(delay)  # start-up retry back-off, not synchronisation
        delay = min(1.0, delay * 2)


def document_from_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, Any] | None:
    """The document of a service that reads its Secret itself (module doc), or None when the
    environment names neither Dragonfly nor MariaDB."""
    if "CONFIG_CENTER_URL" in environ:
        return None
    document: dict[str, Any] = {}
    if environ.get("DRAGONFLY_HOST"):
        section: dict[str, Any] = {"host": environ["DRAGONFLY_HOST"],
                                   "port": int(environ.get("DRAGONFLY_PORT") or 6379)}
        if environ.get("DRAGONFLY_PASSWORD_FILE"):
            section["password_file"] = environ["DRAGONFLY_PASSWORD_FILE"]
        else:
            section["password"] = environ.get("DRAGONFLY_PASSWORD", "")
        document["dragonfly"] = section
    if environ.get("MARIADB_HOST"):
        document["mariadb"] = {"host": environ["MARIADB_HOST"],
                               "port": int(environ.get("MARIADB_PORT") or 3306),
                               "user": environ.get("MARIADB_USER", ""),
                               "password": environ.get("MARIADB_PASSWORD", ""),
                               "database": environ.get("MARIADB_DATABASE", "")}
    return document or None
