"""Client-side SCRAM-SHA-256 verifiers (rotate.core.scram), against vectors taken from a real
PostgreSQL 15 (``ALTER ROLE … PASSWORD 'plain'`` then ``pg_authid.rolpassword``); the live
comparison runs in tests/providers/test_contract.py."""

from __future__ import annotations

import pytest

from rotate.core.scram import parse_verifier, saslprep, scram_verifier
from rotate.core.secret import Secret

#: password 'plain-pw', stored by PostgreSQL 15.x with its own random salt
SERVER_VECTOR = ("SCRAM-SHA-256$4096:V3yB2GtsN6QQKozjELW0kQ==$"
                 "D3VpwPfRv3X0WEdCE6b5wnkxlM0hU0uiJ9MAyZCBVdo=:"
                 "TV32yToLzP1qz0lRpd5OLP/CmexiOOm1+JY77mLEzpM=")


def test_the_server_vector_is_reproduced() -> None:
    stored = parse_verifier(SERVER_VECTOR)
    assert stored.iterations == 4096 and len(stored.salt) == 16
    mine = scram_verifier(Secret("plain-pw"), salt=stored.salt, iterations=stored.iterations)
    assert mine.text == SERVER_VECTOR
    wrong = scram_verifier(Secret("plain-pX"), salt=stored.salt)
    assert wrong.text != SERVER_VECTOR


def test_fresh_salt_per_verifier_and_round_trip() -> None:
    a, b = scram_verifier(Secret("same")), scram_verifier(Secret("same"))
    assert a.salt != b.salt and a.text != b.text
    assert parse_verifier(a.text) == a
    assert "same" not in repr(a)


@pytest.mark.parametrize("text", ["plain-pw", "md5abc", "SCRAM-SHA-256$x:y$z:w",
                                  "SCRAM-SHA-1$4096:AA==$AA==:AA==", ""])
def test_anything_else_is_not_a_verifier(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_verifier(text)
    assert text not in str(info.value) or not text


def test_saslprep_follows_postgres() -> None:
    assert saslprep("ascii\x07ctrl") == b"ascii\x07ctrl"  # pure ASCII: as is
    assert saslprep("a\u00a0b") == b"a b"  # non-ASCII space → space
    assert saslprep("soft\u00adhyphen\u00e9") == "softhyphené".encode()  # mapped to nothing
    assert saslprep("\u2168") == b"IX"  # NFKC
    assert saslprep("\u0627\u0031") == "\u0627\u0031".encode()  # bidi failure: raw bytes
