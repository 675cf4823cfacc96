"""The PromQL adapter (rotate.clients.prometheus): the first value of an instant query,
None for no data, and errors that carry neither the URL nor the server's text.  The real
server is tests/e2e/test_canary.py's (the lab's Prometheus)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from rotate.clients.prometheus import PrometheusQuery
from rotate.core.errors import PermanentError, TemporaryError

URL = "http://user:hunter2@127.0.0.1:9090"


def _answer(status: int, body: Any) -> PrometheusQuery:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/query"
        assert request.url.params["query"] == "up"
        return httpx.Response(status, json=body)

    return PrometheusQuery(httpx.MockTransport(handler))


@pytest.mark.parametrize(("data", "value"), [
    ({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "3.5"]}]}, 3.5),
    ({"resultType": "vector", "result": []}, None),
    ({"resultType": "scalar", "result": [1.0, "2"]}, 2.0),
    ({"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "NaN"]}]}, None),
])
def test_the_first_value_or_none(data: dict[str, Any], value: float | None) -> None:
    assert _answer(200, {"status": "success", "data": data}).value(URL, "up") == value


def test_a_refused_expression_is_permanent_and_says_nothing_of_the_url() -> None:
    with pytest.raises(PermanentError) as err:
        _answer(400, {"status": "error", "error": "parse error near hunter2"}).value(URL, "up")
    assert "hunter2" not in str(err.value) and "127.0.0.1" not in str(err.value)


def test_a_matrix_is_refused() -> None:
    with pytest.raises(PermanentError, match="matrix"):
        _answer(200, {"status": "success", "data": {"resultType": "matrix", "result": []}}
                ).value(URL, "up")


def test_an_unreachable_server_is_temporary() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(TemporaryError) as err:
        PrometheusQuery(httpx.MockTransport(handler)).value(URL, "up")
    assert "hunter2" not in str(err.value)
