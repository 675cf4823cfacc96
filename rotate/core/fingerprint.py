"""A salted, slow fingerprint of an operator-supplied value.

A run started with ``--value-stdin`` that fails before the backend write keeps no copy of
the value; its resume must be given the value again and must not accept a different one.
The journal keeps only this fingerprint: scrypt (n=2^14, r=8, p=1) of the value with a
random 16-byte salt, both hex.  Invariants: the value itself is never stored, and a check
compares in constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

from rotate.core.secret import Secret

ALGORITHM = "scrypt-n16384-r8-p1"


def _derive(value: Secret, salt: bytes) -> bytes:
    return hashlib.scrypt(value.reveal().encode("utf-8", "surrogateescape"), salt=salt,
                          n=2 ** 14, r=8, p=1, dklen=32)


def fingerprint(value: Secret) -> dict[str, str]:
    """``{"algorithm", "salt", "hash"}`` (hex) for the journal."""
    salt = secrets.token_bytes(16)
    return {"algorithm": ALGORITHM, "salt": salt.hex(), "hash": _derive(value, salt).hex()}


def matches(value: Secret, stored: Mapping[str, str]) -> bool:
    """Whether ``value`` is the one ``stored`` was made from (False for an unknown form)."""
    if stored.get("algorithm") != ALGORITHM:
        return False
    try:
        salt, expected = bytes.fromhex(stored["salt"]), bytes.fromhex(stored["hash"])
    except (KeyError, ValueError):
        return False
    return hmac.compare_digest(_derive(value, salt), expected)


class Comparer:
    """Fingerprints for telling, within one process, whether two values are equal without
    holding either next to the other: HMAC-SHA256 under a random key made for this object
    and never stored, so a fingerprint is worthless outside it (no salt to brute-force
    against, unlike :func:`fingerprint`, whose output is journaled and therefore slow).
    Invariant: only fingerprints are kept and compared; the values are never stored."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def of(self, value: Secret) -> bytes:
        return hmac.new(self._key, value.reveal().encode("utf-8", "surrogateescape"),
                        hashlib.sha256).digest()


#: how many hex digits of :func:`shown` are printed (64 bits: enough to tell values apart)
SHOWN_DIGITS = 16


def shown(value: Secret, where: str) -> str:
    """A fingerprint fit to print (``rotate status``): the same value at the same ``where``
    (a backend path) shows the same 16 hex digits on every run and every machine, so two
    readings can be compared by eye.  scrypt (as :func:`fingerprint`) with a salt derived
    from ``where``: slow to guess from, and a value reused at another path does not show
    the same digits.  Invariant: never the value, nor anything cheaper to invert than this."""
    salt = hashlib.sha256(b"rotate status fingerprint\x00" + where.encode("utf-8")).digest()[:16]
    return _derive(value, salt).hex()[:SHOWN_DIGITS]
