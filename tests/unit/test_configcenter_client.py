"""HttpConfigCenter's wire behaviour and error translation, against respx.

The happy paths also run against the real reference server in
tests/adapters/test_configcenter_adapter.py; here every error path is forced, and each raised
error's text is checked for the admin token and the password the request carried.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator

import httpx
import pytest
import respx

from rotate.clients.configcenter import HttpConfigCenter
from rotate.core.errors import (
    ClientError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    RejectedError,
    TemporaryError,
)
from rotate.core.secret import Secret

URL = "http://cc.test"
ADMIN = "admin-token-0123456789-abcdef"
PASSWORD = "Sup3r-Secret-Passw0rd-xyz"
KEY_URL = f"{URL}/v1/services/cart/keys/bootstrap"


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as r:
        yield r


@pytest.fixture
def cc() -> Iterator[HttpConfigCenter]:
    client = HttpConfigCenter(URL, Secret(ADMIN), timeout=2)
    yield client
    client.close()


def doc() -> dict[str, object]:
    return {"service": {"name": "cart"},
            "dragonfly": {"password": Secret(PASSWORD),
                          "url": Secret(f"redis://:{PASSWORD}@dragonfly:6379/0")}}


def assert_clean(exc: BaseException) -> None:
    text = " ".join([str(exc), repr(exc), *(f"{p} {m}" for p, m in getattr(exc, "details", []))])
    for forbidden in (ADMIN, PASSWORD, URL, "cc.test"):
        assert forbidden not in text, (forbidden, text)


def test_put_sends_revealed_body_if_match_and_bearer(
    router: respx.MockRouter, cc: HttpConfigCenter
) -> None:
    route = router.put("/v1/services/cart/keys/bootstrap").respond(200, json={"version": 8})
    assert cc.put_key("cart", "bootstrap", doc(), if_match=7) == 8
    request = route.calls.last.request
    assert request.headers["If-Match"] == '"7"'
    assert "If-None-Match" not in request.headers
    assert request.headers["Authorization"] == f"Bearer {ADMIN}"
    body = json.loads(request.content)
    assert body["value"]["dragonfly"]["password"] == PASSWORD
    assert body["value"]["service"] == {"name": "cart"}


def test_put_without_version_creates(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    route = router.put("/v1/services/cart/keys/bootstrap").respond(200, json={"version": 1})
    assert cc.put_key("cart", "bootstrap", {"a": 1}, if_match=None) == 1
    assert route.calls.last.request.headers["If-None-Match"] == "*"
    assert "If-Match" not in route.calls.last.request.headers


def test_get_key_and_version_number(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    router.get("/v1/services/cart/keys/bootstrap").respond(
        200, json={"value": {"a": 1}, "version": 7}, headers={"ETag": '"7"'})
    router.get("/v1/services/cart/keys/missing").respond(404, json={"error": "not found"})
    got = cc.get_key("cart", "bootstrap")
    assert (got.version, dict(got.value)) == (7, {"a": 1})
    assert cc.get_version_number("cart", "bootstrap") == 7
    assert cc.get_version_number("cart", "missing") is None
    with pytest.raises(NotFoundError):
        cc.get_key("cart", "missing")


def test_412_is_a_conflict(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    router.put("/v1/services/cart/keys/bootstrap").respond(
        412, json={"error": "precondition failed", "current": 9})
    with pytest.raises(ConflictError) as info:
        cc.put_key("cart", "bootstrap", doc(), if_match=7)
    assert info.value.status == 412
    assert_clean(info.value)


def test_422_carries_details_without_the_password(
    router: respx.MockRouter, cc: HttpConfigCenter
) -> None:
    router.put("/v1/services/cart/keys/bootstrap").respond(422, json={
        "error": "schema",
        "details": [
            {"path": "/dragonfly/password", "message": f"'{PASSWORD}' is too short"},
            {"path": "/dragonfly/url",
             "message": f"'redis://:{PASSWORD}@dragonfly:6379/0' does not match '^rediss://'"},
        ]})
    with pytest.raises(RejectedError) as info:
        cc.put_key("cart", "bootstrap", doc(), if_match=7)
    exc = info.value
    assert exc.status == 422
    assert [p for p, _ in exc.details] == ["/dragonfly/password", "/dragonfly/url"]
    assert "is too short" in exc.details[0][1] and "••••" in exc.details[0][1]
    assert "does not match '^rediss://'" in exc.details[1][1]
    assert_clean(exc)


@pytest.mark.parametrize("quoted", [
    lambda v: repr(v) + " is too short",  # Python repr escapes ' and \\
    lambda v: json.dumps(v) + " is too short",  # a JSON-quoting validator
    lambda v: repr(v[:12] + "...") + " is too short",  # a validator that cuts long instances
])
def test_422_masks_escaped_and_truncated_quotes(
    router: respx.MockRouter, cc: HttpConfigCenter, quoted: Callable[[str], str],
) -> None:
    tricky = "it's-a-\\back\\slash-\"quoted\"-value"
    router.put("/v1/services/cart/keys/bootstrap").respond(422, json={
        "error": "schema", "details": [{"path": "/pw", "message": quoted(tricky)}]})
    with pytest.raises(RejectedError) as info:
        cc.put_key("cart", "bootstrap", {"pw": Secret(tricky)}, if_match=7)
    (path, message), = info.value.details
    assert path == "/pw"
    for i in range(len(tricky) - 7):
        assert tricky[i:i + 8] not in message, "a fragment of the secret leaked"


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_temporary(router: respx.MockRouter, cc: HttpConfigCenter, status: int) -> None:
    router.put("/v1/services/cart/keys/bootstrap").respond(
        status, text=f"upstream says {ADMIN} {PASSWORD} at {URL}")
    with pytest.raises(TemporaryError) as info:
        cc.put_key("cart", "bootstrap", doc(), if_match=7)
    assert info.value.status == status
    assert_clean(info.value)


def test_401_is_forbidden(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    router.get("/v1/services").respond(401, json={"error": f"bad token {ADMIN}"})
    with pytest.raises(ForbiddenError) as info:
        cc.services()
    assert "admin token was refused" in str(info.value)
    assert_clean(info.value)


def test_malformed_json_is_permanent(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    router.get("/v1/services/cart/keys/bootstrap").respond(
        200, text=f"<html>{PASSWORD}</html>")
    router.post("/v1/services/cart/tokens").respond(201, json=["not", "an", "object"])
    with pytest.raises(PermanentError) as info:
        cc.get_key("cart", "bootstrap")
    assert "malformed JSON" in str(info.value)
    assert_clean(info.value)
    with pytest.raises(PermanentError, match="not a JSON object"):
        cc.mint_token("cart")


def test_transport_errors_are_temporary(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    router.get("/v1/services").mock(side_effect=httpx.ConnectError(f"refused {URL} {ADMIN}"))
    router.get("/healthz").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(TemporaryError, match="unreachable") as info:
        cc.services()
    assert info.value.reason == f"unreachable at {URL}"  # the address (issue 9), no more
    assert ADMIN not in str(info.value) and "refused" not in str(info.value)
    with pytest.raises(TemporaryError, match="timed out"):
        cc.health()


def test_connection_refused_for_real() -> None:
    # A port that was just free: nothing listens there.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = HttpConfigCenter(f"http://127.0.0.1:{port}", Secret(ADMIN), timeout=2)
    with pytest.raises(TemporaryError) as info:
        client.put_key("cart", "bootstrap", doc(), if_match=1)
    # issue 9: "unreachable" names the address (display form: never user info or a query)
    assert info.value.message == (f"config center: put cart/bootstrap: unreachable at "
                                  f"http://127.0.0.1:{port}")
    assert_clean(info.value)
    client.close()


def test_restore_version_writes_old_content_with_if_match(
    router: respx.MockRouter, cc: HttpConfigCenter
) -> None:
    old = {"dragonfly": {"password": "old-password-value"}, "port": 6379}
    router.get("/v1/services/cart/keys/bootstrap/versions/3").respond(
        200, json={"value": old, "version": 3})
    put = router.put("/v1/services/cart/keys/bootstrap").respond(200, json={"version": 9})
    assert cc.restore_version("cart", "bootstrap", 3, if_match=8) == 9
    request = put.calls.last.request
    assert request.headers["If-Match"] == '"8"'
    assert json.loads(request.content) == {"value": old}


def test_restore_version_rejection_does_not_quote_the_old_value(
    router: respx.MockRouter, cc: HttpConfigCenter
) -> None:
    router.get("/v1/services/cart/keys/bootstrap/versions/3").respond(
        200, json={"value": {"pw": "old-password-value"}, "version": 3})
    router.put("/v1/services/cart/keys/bootstrap").respond(422, json={
        "error": "schema", "details": [{"path": "/pw", "message": "'old-password-value' bad"}]})
    with pytest.raises(RejectedError) as info:
        cc.restore_version("cart", "bootstrap", 3, if_match=8)
    assert "old-password-value" not in str(info.value.details)


def test_tokens(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    router.post("/v1/services/cart/tokens").respond(
        201, json={"id": "tok-1", "token": "machine-token-value",
                   "expires_at": "2027-01-01T00:00:00Z"})
    router.get("/v1/services/cart/tokens").respond(
        200, json=[{"id": "tok-1", "created_at": "2026-12-02T00:00:00Z", "revoked": False}])
    delete = router.delete("/v1/services/cart/tokens/tok-1").respond(204)
    router.delete("/v1/services/cart/tokens/tok-2").respond(404, json={"error": "no such token"})
    minted = cc.mint_token("cart")
    assert minted.id == "tok-1" and minted.token == Secret("machine-token-value")
    assert "machine-token-value" not in repr(minted)
    infos = cc.list_tokens("cart")
    assert [(t.id, t.revoked) for t in infos] == [("tok-1", False)]
    cc.revoke_token("cart", "tok-1")
    assert delete.called
    with pytest.raises(NotFoundError):
        cc.revoke_token("cart", "tok-2")


def test_names_are_escaped_in_paths(router: respx.MockRouter, cc: HttpConfigCenter) -> None:
    route = router.get(url__regex=r".*/keys/a%2Fb$").respond(200, json={"value": {}, "version": 1})
    assert cc.get_key("cart", "a/b").version == 1
    assert route.called


def test_every_client_error_is_a_client_error() -> None:
    # The engine's wait loop relies on the split; guard the hierarchy used above.
    assert issubclass(TemporaryError, ClientError) and issubclass(RejectedError, PermanentError)


def test_a_bad_url_is_permanent_not_retried() -> None:
    client = HttpConfigCenter("ftp://cc.test", Secret(ADMIN))
    with pytest.raises(PermanentError) as info:
        client.services()
    assert not info.value.temporary
    assert_clean(info.value)
    client.close()


def test_an_http_config_center_loads_no_ca_bundle_an_https_one_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx loads its CA bundle (~35 ms of CPU) for every client, TLS or not: at every start
    # of rotate.  A plain-http Config Center never speaks TLS (base URL fixed, redirects not
    # followed), so it is spared; an https one still verifies against the bundle.
    import ssl
    loads: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: object, **kw: object) -> None:
        loads.append(args or kw)
        load(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    HttpConfigCenter("http://cc.example:8080", Secret("t")).close()
    assert loads == []
    HttpConfigCenter("https://cc.example:8443", Secret("t")).close()
    assert loads
