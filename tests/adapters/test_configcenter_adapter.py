"""HttpConfigCenter against the real reference server (rotate_lab.systems.configcenter),
run as its own process on 127.0.0.1 and stopped by pid."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rotate_lab.faults import Faults

from rotate.clients.configcenter import HttpConfigCenter
from rotate.core.errors import (
    ClientError,
    ConflictError,
    ForbiddenError,
    RejectedError,
    TemporaryError,
)
from rotate.core.secret import Secret
from tests.support.configcenter_server import ADMIN, Server, doc
from tests.support.paths import shop_schema

PASSWORD_1 = "First-Dragonfly-Password-0123456789"
PASSWORD_2 = "Second-Dragonfly-Password-9876543210"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    yield s
    s.stop()


@pytest.fixture
def cc(server: Server) -> Iterator[HttpConfigCenter]:
    client = HttpConfigCenter(server.url, Secret(ADMIN), timeout=5)
    client.put_schema("cart", shop_schema("cart"))
    yield client
    client.close()


def assert_clean(exc: ClientError, server: Server) -> None:
    text = f"{exc} {exc!r} {exc.details}"
    for forbidden in (ADMIN, PASSWORD_1, PASSWORD_2, server.url):
        assert forbidden not in text, (forbidden, text)


# Versions, If-Match, earlier versions, restores and tokens are the seam's contract, checked
# on this adapter and on the fake alike: tests/contracts/test_configcenter_contract.py.  Here:
# what only the real adapter shows.


def test_schemas_and_a_clean_conflict(cc: HttpConfigCenter, server: Server) -> None:
    assert cc.services() == ["cart"]
    assert cc.get_schema("cart")["type"] == "object"
    assert cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None) == 1
    with pytest.raises(ConflictError) as info:  # create-only on an existing key
        cc.put_key("cart", "bootstrap", doc(PASSWORD_2), if_match=None)
    assert_clean(info.value, server)
    assert PASSWORD_1 not in repr(cc.get_key("cart", "bootstrap"))


def test_schema_rejection_has_paths(cc: HttpConfigCenter, server: Server) -> None:
    cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None)
    bad = doc("short!")
    del bad["service"]
    with pytest.raises(RejectedError) as info:
        cc.put_key("cart", "bootstrap", bad, if_match=1)
    paths = {p for p, _ in info.value.details}
    assert "/dragonfly/password" in paths
    assert "short!" not in str(info.value.details)
    assert_clean(info.value, server)
    assert cc.get_version_number("cart", "bootstrap") == 1


def test_wrong_admin_token_and_5xx_fault(cc: HttpConfigCenter, server: Server) -> None:
    wrong = HttpConfigCenter(server.url, Secret("wrong-" + ADMIN), timeout=5)
    with pytest.raises(ForbiddenError) as info:
        wrong.services()
    assert "wrong-" not in str(info.value)
    with pytest.raises(ForbiddenError):  # the write probe is refused like a write
        wrong.probe_write("cart", "bootstrap")
    wrong.close()

    Faults.write(server.tmp / "faults.json", {"config-center-5xx": True})
    with pytest.raises(TemporaryError) as temp:
        cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None)
    assert temp.value.status == 503
    assert_clean(temp.value, server)
    with pytest.raises(TemporaryError):  # preflight's configcenter.writable sees it first
        cc.probe_write("cart", "bootstrap")
    Faults.write(server.tmp / "faults.json", {})
    assert cc.put_key("cart", "bootstrap", doc(PASSWORD_1), if_match=None) == 1


def test_server_stopped_is_temporary(cc: HttpConfigCenter, server: Server) -> None:
    server.stop()
    with pytest.raises(TemporaryError) as info:
        cc.get_key("cart", "bootstrap")
    assert info.value.reason == f"unreachable at {server.url}"  # the address, issue 9
    assert ADMIN not in str(info.value)
