"""The ConfigCenter seam: FakeConfigCenter and HttpConfigCenter against the reference server
(run as its own process on 127.0.0.1, as in tests/adapters/test_configcenter_adapter.py).

What only the real adapter can show (schema rejections with paths, a wrong admin token, 5xx
and a stopped server) stays in the adapter test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.clients.configcenter import HttpConfigCenter
from rotate.clients.seams import ConfigCenter
from rotate.core.errors import ConflictError, NotFoundError
from rotate.core.secret import Secret
from tests.fakes import FakeConfigCenter
from tests.support.configcenter_server import ADMIN, Server, doc
from tests.support.paths import shop_schema

PASSWORD_1 = "First-Dragonfly-Password-0123456789"
PASSWORD_2 = "Second-Dragonfly-Password-9876543210"


@pytest.fixture(params=["fake", "real"])
def cc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ConfigCenter]:
    if request.param == "fake":
        yield FakeConfigCenter()
        return
    server = Server(tmp_path)
    client = HttpConfigCenter(server.url, Secret(ADMIN), timeout=5)
    try:
        client.put_schema("cart", shop_schema("cart"))
        yield client
    finally:
        client.close()
        server.stop()


def _password(value: object) -> object:
    return value["dragonfly"]["password"]  # type: ignore[index]


def test_documents_are_versioned_and_written_if_match(cc: ConfigCenter) -> None:
    cc.health()
    assert cc.get_version_number("cart", "bootstrap") is None
    with pytest.raises(NotFoundError):
        cc.get_key("cart", "bootstrap")
    assert cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None) == 1
    assert "cart" in cc.services()
    with pytest.raises(ConflictError):  # create-only on an existing key
        cc.put_key("cart", "bootstrap", doc(PASSWORD_2), if_match=None)
    assert cc.put_key("cart", "bootstrap", doc(PASSWORD_2), if_match=1) == 2
    with pytest.raises(ConflictError):  # a writer still holding version 1 loses
        cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=1)
    current = cc.get_key("cart", "bootstrap")
    assert current.version == 2 and _password(current.value) == PASSWORD_2
    assert cc.get_version_number("cart", "bootstrap") == 2


def test_an_earlier_version_is_read_and_restored_as_a_new_one(cc: ConfigCenter) -> None:
    cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None)
    cc.put_key("cart", "bootstrap", doc(PASSWORD_2), if_match=1)
    first = cc.get_version("cart", "bootstrap", 1)
    assert first.version == 1 and _password(first.value) == PASSWORD_1
    with pytest.raises(NotFoundError):
        cc.get_version("cart", "bootstrap", 9)
    with pytest.raises(ConflictError):  # If-Match a stale version
        cc.restore_version("cart", "bootstrap", 1, if_match=1)
    assert cc.restore_version("cart", "bootstrap", 1, if_match=2) == 3
    restored = cc.get_key("cart", "bootstrap")
    assert (restored.version, _password(restored.value)) == (3, PASSWORD_1)
    with pytest.raises(NotFoundError):
        cc.restore_version("cart", "bootstrap", 9, if_match=3)


def test_tokens_are_minted_listed_and_revoked(cc: ConfigCenter) -> None:
    minted = cc.mint_token("cart")
    assert isinstance(minted.token, Secret) and minted.expires_at.endswith("Z")
    other = cc.mint_token("cart")
    assert other.id != minted.id and other.token != minted.token
    listed = {t.id: t.revoked for t in cc.list_tokens("cart")}
    assert listed == {minted.id: False, other.id: False}
    cc.revoke_token("cart", minted.id)
    after = {t.id: t.revoked for t in cc.list_tokens("cart")}
    assert after.get(minted.id, True) is True and after[other.id] is False
    with pytest.raises(NotFoundError):
        cc.revoke_token("cart", "no-such-token")


def test_a_token_is_listed_with_the_label_it_was_minted_with(cc: ConfigCenter) -> None:
    tagged = cc.mint_token("cart", "20261203T081500Z-dragonfly-abcd")
    plain = cc.mint_token("cart")
    labels = {t.id: t.label for t in cc.list_tokens("cart")}
    assert labels == {tagged.id: "20261203T081500Z-dragonfly-abcd", plain.id: None}


def test_the_write_probe_proves_access_and_changes_nothing(cc: ConfigCenter) -> None:
    cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None)
    cc.probe_write("cart", "bootstrap")  # If-Match "0": 412, before the body is validated
    current = cc.get_key("cart", "bootstrap")
    assert current.version == 1 and _password(current.value) == PASSWORD_1
    cc.probe_write("cart", "no-such-key")  # a key that does not exist: 412 too
    assert cc.get_version_number("cart", "no-such-key") is None
