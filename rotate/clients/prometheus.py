"""PromQL instant queries against a Prometheus server (:class:`rotate.clients.seams.Metrics`).

``GET /api/v1/query?query=EXPR``: the one number a canary's bake compares with its bound.
An instant vector's first sample or a scalar is the value; an empty vector is None (no data:
nothing to compare).  Errors never carry the URL or the server's text — the URL may hold
credentials, the text may echo anything — only what kind of failure it was.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rotate.clients.http_errors import translated
from rotate.core.errors import PermanentError, TemporaryError

if TYPE_CHECKING:
    import httpx

SYSTEM = "prometheus"
OPERATION = "instant query"


class PrometheusQuery:
    """One client per run; ``value`` is one instant query.  httpx is imported on the first
    query: a run without a canary query never pays for it."""

    def __init__(self, transport: httpx.BaseTransport | None = None, *,
                 timeout: float = 5) -> None:
        self._transport = transport
        self._timeout = timeout
        self._client: httpx.Client | None = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def value(self, url: str, expr: str) -> float | None:
        import httpx

        if self._client is None:
            self._client = httpx.Client(transport=self._transport, timeout=self._timeout,
                                        follow_redirects=False)
        with translated(SYSTEM, OPERATION):
            response = self._client.get(url.rstrip("/") + "/api/v1/query",
                                        params={"query": expr})
        if response.status_code == 400 or response.status_code == 422:
            raise PermanentError(SYSTEM, OPERATION, "the server refused the expression",
                                 status=response.status_code)
        if response.status_code != 200:
            raise TemporaryError(SYSTEM, OPERATION, "no answer", status=response.status_code)
        try:
            body = response.json()
        except ValueError:
            raise TemporaryError(SYSTEM, OPERATION, "not a JSON answer") from None
        return _first_value(body)


def _first_value(body: Any) -> float | None:
    """The first sample's value of a query result, or None when the vector is empty."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or body.get("status") != "success":
        raise TemporaryError(SYSTEM, OPERATION, "no result in the answer")
    kind: Any = data.get("resultType")
    result: Any = data.get("result")
    try:
        if kind == "scalar":
            number = float(result[1])
        elif kind == "vector" and isinstance(result, list):
            if not result:
                return None
            number = float(result[0]["value"][1])
        else:
            shape = kind if kind in ("matrix", "string") else "unknown"
            raise PermanentError(SYSTEM, OPERATION, f"a {shape} result: the expression must "
                                 "give a scalar or an instant vector")
    except (TypeError, KeyError, IndexError, ValueError):
        raise TemporaryError(SYSTEM, OPERATION, "a malformed result") from None
    return None if math.isnan(number) else number
