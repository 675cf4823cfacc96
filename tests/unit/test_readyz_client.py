"""UrlReadyz over respx and a real closed port; routing between URL and service proxy.

ProxyReadyz against the real lab API server is covered by
tests/adapters/test_kube_adapter.py::test_service_proxy (it is KubeClient.proxy_get).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
import respx

from rotate.clients.readyz import ProxyReadyz, ReadyzRouter, UrlReadyz
from rotate.clients.seams import ReadyzTarget
from rotate.core.errors import PermanentError, TemporaryError

URL = "http://cart.shop.test/readyz"


def url_target(url: str = URL) -> ReadyzTarget:
    return ReadyzTarget("shop", "cart", "http", "/readyz", url=url)


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as r:
        yield r


@pytest.mark.parametrize("status", [200, 204, 302, 500, 503])
def test_status_is_returned_as_is(router: respx.MockRouter, status: int) -> None:
    router.get(URL).respond(status, headers={"Location": "http://elsewhere/"})
    assert UrlReadyz().status(url_target()) == status


def test_connection_failure_and_timeout_are_temporary(router: respx.MockRouter) -> None:
    router.get(URL).mock(side_effect=httpx.ConnectError("refused"))
    router.get("http://slow.test/readyz").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(TemporaryError) as info:
        UrlReadyz().status(url_target())
    assert info.value.message == "readyz: GET readyz of shop/cart: unreachable"
    with pytest.raises(TemporaryError, match="timed out"):
        UrlReadyz().status(url_target("http://slow.test/readyz"))


def test_connection_refused_for_real() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/readyz"
    with pytest.raises(TemporaryError) as info:
        UrlReadyz(timeout=2).status(url_target(url))
    assert url not in str(info.value) and str(port) not in str(info.value)


class _FakeKube:
    """Only proxy_get is used by ProxyReadyz."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | int, str, float]] = []

    def proxy_get(self, namespace: str, service: str, port: str | int, path: str, *,
                  timeout: float = 5) -> int:
        self.calls.append((namespace, service, port, path, timeout))
        return 503


def test_router_sends_url_targets_over_http_and_others_through_the_proxy(
    router: respx.MockRouter,
) -> None:
    router.get(URL).respond(200)
    kube = _FakeKube()
    readyz = ReadyzRouter(kube, timeout=3)  # type: ignore[arg-type]
    assert readyz.status(url_target()) == 200
    assert readyz.status(ReadyzTarget("shop", "order", 8080, "/ready")) == 503
    assert kube.calls == [("shop", "order", 8080, "/ready", 3)]
    assert ProxyReadyz(kube).status(ReadyzTarget("shop", "user", "http")) == 503  # type: ignore[arg-type]
    assert kube.calls[-1] == ("shop", "user", "http", "/readyz", 5)


def test_a_non_http_url_is_permanent() -> None:
    with pytest.raises(PermanentError) as info:
        UrlReadyz().status(url_target("ftp://cart.shop.test/readyz"))
    assert "ftp" not in str(info.value)


def test_a_url_target_is_shown_without_its_credentials() -> None:
    target = ReadyzTarget("shop", "cart", "http", url="https://probe:s3cr3t@cart.test:8443/readyz"
                                                       "?token=t0k3n")
    assert str(target) == "https://cart.test:8443/readyz"
