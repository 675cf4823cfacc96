"""SCRAM-SHA-256 verifiers for PostgreSQL, computed on the client (RFC 5802 / RFC 7677).

Why: ``ALTER ROLE r PASSWORD 'plain'`` puts the password into the statement text, which a
server with ``log_statement = all`` (or ``ddl``), ``pg_stat_statements`` or an audit extension
records.  ``psql \\password`` and libpq's ``PQencryptPasswordConn`` avoid that by sending the
verifier instead; the server stores a string of this shape verbatim::

    SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>      (base64 fields)

    SaltedPassword = PBKDF2-HMAC-SHA-256(SASLprep(password), salt, iterations)
    StoredKey      = SHA-256(HMAC(SaltedPassword, "Client Key"))
    ServerKey      = HMAC(SaltedPassword, "Server Key")

The verifier lets the server check a login, and an attacker with it can mount an offline
guessing attack (like any password hash), so it stays out of logs of our own; but it is not
the password, and a statement log holding it does not give the password away.

SASLprep follows PostgreSQL's ``pg_saslprep`` exactly, because the server runs the same
normalisation on the login side: pure ASCII is used as is; otherwise RFC 4013 (map non-ASCII
spaces to space, drop "mapped to nothing", NFKC, prohibited output and bidi checks); a string
that fails any check is used as its raw UTF-8 bytes.  Pure: no I/O, no randomness except
:func:`new_salt`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stringprep
import unicodedata
from dataclasses import dataclass

from rotate.core.secret import Secret

SCRAM_ITERATIONS = 4096  # PostgreSQL's default scram_iterations and libpq's
SALT_BYTES = 16  # libpq's SCRAM_DEFAULT_SALT_LEN
PREFIX = "SCRAM-SHA-256"


@dataclass(frozen=True)
class ScramVerifier:
    """A parsed verifier; ``text`` is what the server stores in ``pg_authid.rolpassword``."""

    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    @property
    def text(self) -> str:
        def b64(raw: bytes) -> str:
            return base64.b64encode(raw).decode("ascii")

        return (f"{PREFIX}${self.iterations}:{b64(self.salt)}"
                f"${b64(self.stored_key)}:{b64(self.server_key)}")

    def __repr__(self) -> str:  # short: a verifier is not for logs either
        return f"ScramVerifier(iterations={self.iterations})"


def new_salt() -> bytes:
    return os.urandom(SALT_BYTES)


def scram_verifier(
    password: Secret, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> ScramVerifier:
    """The SCRAM-SHA-256 verifier of ``password`` (a fresh random salt unless given)."""
    if iterations < 1:
        raise ValueError("iterations must be positive")
    salt = new_salt() if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", saslprep(password.reveal()), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return ScramVerifier(iterations, salt, stored_key, server_key)


def parse_verifier(text: str) -> ScramVerifier:
    """Inverse of :attr:`ScramVerifier.text`; ValueError on anything else (no text echoed)."""
    try:
        prefix, rest = text.split("$", 1)
        head, keys = rest.split("$", 1)
        iterations, salt = head.split(":", 1)
        stored, server = keys.split(":", 1)
        if prefix != PREFIX:
            raise ValueError
        return ScramVerifier(int(iterations), base64.b64decode(salt, validate=True),
                             base64.b64decode(stored, validate=True),
                             base64.b64decode(server, validate=True))
    except (ValueError, TypeError):
        raise ValueError("not a SCRAM-SHA-256 verifier") from None


def saslprep(password: str) -> bytes:
    """The bytes PostgreSQL hashes for ``password`` (``pg_saslprep``, falling back to raw)."""
    raw = password.encode("utf-8", "surrogatepass")
    if password.isascii():
        return raw
    prepared = _rfc4013(password)
    return raw if prepared is None else prepared.encode("utf-8")


def _rfc4013(text: str) -> str | None:
    """RFC 4013 SASLprep for stored strings; None when the string is prohibited."""
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch
        for ch in text
        if not stringprep.in_table_b1(ch)
    )
    normal = unicodedata.normalize("NFKC", mapped)
    if not normal:
        return None
    prohibited = (
        stringprep.in_table_c12, stringprep.in_table_c21_c22, stringprep.in_table_c3,
        stringprep.in_table_c4, stringprep.in_table_c5, stringprep.in_table_c6,
        stringprep.in_table_c7, stringprep.in_table_c8, stringprep.in_table_c9,
        stringprep.in_table_a1,  # unassigned code points: prohibited in stored strings
    )
    if any(check(ch) for ch in normal for check in prohibited):
        return None
    rand_al = [stringprep.in_table_d1(ch) for ch in normal]
    if any(rand_al):
        if any(stringprep.in_table_d2(ch) for ch in normal):
            return None
        if not (rand_al[0] and rand_al[-1]):
            return None
    return normal
