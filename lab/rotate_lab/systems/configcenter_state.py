"""The Config Center's durable state: schemas, versioned keys and machine tokens in SQLite.

Invariants (config-center-api.md):

- A key's versions are 1, 2, 3, … with no gaps; every successful write adds exactly one row and
  no row is ever changed, so any earlier version stays readable for rollback.
- A conditional write compares and inserts inside one ``BEGIN IMMEDIATE`` transaction, so two
  writers holding the same ``If-Match`` cannot both succeed — even across processes sharing
  the file.
- A machine token is shown once, at minting; only its SHA-256 is stored.  Revocation is a
  flag checked on every lookup, so a revoked token fails on the very next request.
- Validation messages are built from the schema keyword and the schema's own value, never
  from the instance: the document being rejected usually holds a password.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN_TTL = dt.timedelta(days=30)

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS schemas (
    service TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS key_versions (
    service TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (service, key, version)
);
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    service TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0,
    label TEXT
);
"""


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class PreconditionFailed(Exception):
    """If-Match named a version that is no longer current, or If-None-Match found one."""


class NoSchema(Exception):
    """The service has no schema, so no document of it can be checked."""


@dataclass(frozen=True)
class Violation:
    path: str  # JSON Pointer into the document
    message: str  # from the keyword and the schema value only


@dataclass(frozen=True)
class MintedToken:
    id: str
    token: str
    expires_at: str


class State:
    """One SQLite connection shared by the server's threads behind a lock.

    SQLite serialises writers anyway; one connection plus a lock keeps transactions simple and
    is far faster than the lab's request rate needs.
    """

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA_SQL)
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(tokens)")}
            if "label" not in columns:  # a database made before tokens had labels
                self._db.execute("ALTER TABLE tokens ADD COLUMN label TEXT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- services and schemas -------------------------------------------------------------

    def services(self) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT service FROM schemas UNION SELECT service FROM key_versions "
                "UNION SELECT service FROM tokens ORDER BY 1"
            ).fetchall()
        return [r[0] for r in rows]

    def get_schema(self, service: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT body FROM schemas WHERE service = ?", (service,)
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def put_schema(self, service: str, schema: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO schemas(service, body) VALUES (?, ?) "
                "ON CONFLICT(service) DO UPDATE SET body = excluded.body",
                (service, json.dumps(schema, sort_keys=True)),
            )

    # -- keys -----------------------------------------------------------------------------

    def get_key(self, service: str, key: str, version: int | None = None) -> tuple[Any, int] | None:
        """``(value, version)`` of the latest (or the given) version, or None."""
        with self._lock:
            if version is None:
                row = self._db.execute(
                    "SELECT body, version FROM key_versions WHERE service = ? AND key = ? "
                    "ORDER BY version DESC LIMIT 1",
                    (service, key),
                ).fetchone()
            else:
                row = self._db.execute(
                    "SELECT body, version FROM key_versions "
                    "WHERE service = ? AND key = ? AND version = ?",
                    (service, key, version),
                ).fetchone()
        return None if row is None else (json.loads(row[0]), int(row[1]))

    def put_key(
        self,
        service: str,
        key: str,
        value: Any,
        *,
        if_match: int | None = None,
        if_none_match: bool = False,
    ) -> int:
        """Validate and store ``value`` as the next version; return that version.

        Raises NoSchema, ``list[Violation]`` wrapped in :class:`SchemaRejected`, or
        PreconditionFailed.
        """
        schema = self.get_schema(service)
        if schema is None:
            raise NoSchema(service)
        problems = violations(schema, value)
        if problems:
            raise SchemaRejected(problems)
        body = json.dumps(value, sort_keys=True)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT MAX(version) FROM key_versions WHERE service = ? AND key = ?",
                    (service, key),
                ).fetchone()
                current = int(row[0]) if row and row[0] is not None else 0
                if if_none_match and current:
                    raise PreconditionFailed
                if if_match is not None and if_match != current:
                    raise PreconditionFailed
                self._db.execute(
                    "INSERT INTO key_versions(service, key, version, body, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (service, key, current + 1, body, rfc3339(_now())),
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return current + 1

    # -- machine tokens -------------------------------------------------------------------

    def current_version(self, service: str, key: str) -> int:
        """The key's latest version, 0 when it does not exist."""
        with self._lock:
            row = self._db.execute(
                "SELECT MAX(version) FROM key_versions WHERE service = ? AND key = ?",
                (service, key)).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def mint_token(self, service: str, label: str | None = None) -> MintedToken:
        token_id = "tok_" + secrets.token_hex(8)
        token = "cct_" + secrets.token_urlsafe(32)
        created = _now()
        expires = created + TOKEN_TTL
        with self._lock:
            self._db.execute(
                "INSERT INTO tokens(id, service, token_sha256, created_at, expires_at, label) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (token_id, service, _digest(token), rfc3339(created), rfc3339(expires), label),
            )
        return MintedToken(token_id, token, rfc3339(expires))

    def list_tokens(self, service: str) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, created_at, expires_at, revoked, label FROM tokens WHERE service = ? "
                "ORDER BY created_at, rowid",
                (service,),
            ).fetchall()
        return [
            {"id": r[0], "created_at": r[1], "expires_at": r[2], "revoked": bool(r[3]),
             "label": r[4]}
            for r in rows
        ]

    def revoke_token(self, service: str, token_id: str) -> bool:
        """True if the token exists (revoking twice is not an error)."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE tokens SET revoked = 1 WHERE service = ? AND id = ?", (service, token_id)
            )
        return cur.rowcount > 0

    def service_for_token(self, token: str) -> str | None:
        """The service a live (known, unrevoked, unexpired) token belongs to."""
        with self._lock:
            row = self._db.execute(
                "SELECT service, expires_at, revoked FROM tokens WHERE token_sha256 = ?",
                (_digest(token),),
            ).fetchone()
        if row is None or row[2]:
            return None
        if rfc3339(_now()) >= row[1]:  # same fixed-width UTC format: string order is time order
            return None
        return str(row[0])


class SchemaRejected(Exception):
    def __init__(self, problems: list[Violation]) -> None:
        super().__init__(f"{len(problems)} schema violation(s)")
        self.problems = problems


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _describe(keyword: str, expected: Any) -> str:
    """A message from the keyword and the schema's value alone."""
    if keyword == "type":
        return f"is not of type {expected!r}" if isinstance(expected, str) else (
            f"is not of any of the types {list(expected)!r}")
    return _MESSAGES.get(keyword, "fails the {keyword!r} constraint").format(
        expected=expected, keyword=keyword
    )


_MESSAGES: dict[str, str] = {
    "minLength": "is shorter than {expected} characters",
    "maxLength": "is longer than {expected} characters",
    "pattern": "does not match pattern {expected}",
    "format": "is not a valid {expected}",
    "minimum": "is less than the minimum of {expected}",
    "maximum": "is greater than the maximum of {expected}",
    "exclusiveMinimum": "is not greater than {expected}",
    "exclusiveMaximum": "is not less than {expected}",
    "multipleOf": "is not a multiple of {expected}",
    "enum": "is not one of {expected!r}",
    "const": "is not {expected!r}",
    "minItems": "has fewer than {expected} items",
    "maxItems": "has more than {expected} items",
    "uniqueItems": "has non-unique items",
    "minProperties": "has fewer than {expected} properties",
    "maxProperties": "has more than {expected} properties",
}


def violations(schema: dict[str, Any], document: Any) -> list[Violation]:
    """Every violation of ``schema`` by ``document``, sorted by path, values never quoted."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    out: list[Violation] = []
    for err in validator.iter_errors(document):
        path = list(err.absolute_path)
        keyword = str(err.validator)
        if keyword == "required" and isinstance(err.instance, dict):
            for prop in err.validator_value:
                if prop not in err.instance:
                    out.append(Violation(_pointer([*path, prop]), "is a required property"))
        elif keyword == "additionalProperties" and isinstance(err.instance, dict):
            allowed = set(err.schema.get("properties", {}))
            patterns = list(err.schema.get("patternProperties", {}))
            for prop in err.instance:
                if prop not in allowed and not any(re.search(p, prop) for p in patterns):
                    out.append(Violation(_pointer([*path, prop]), "is not an allowed property"))
        else:
            out.append(Violation(_pointer(path), _describe(keyword, err.validator_value)))
    return sorted(set(out), key=lambda v: (v.path, v.message))


def schema_problems(schema: Any) -> list[Violation]:
    """Why ``schema`` is not a usable JSON Schema (empty when it is)."""
    import jsonschema

    if not isinstance(schema, dict):
        return [Violation("", "a schema must be a JSON object")]
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [Violation(_pointer(exc.absolute_path), f"invalid schema ({exc.validator})")]
    return []
