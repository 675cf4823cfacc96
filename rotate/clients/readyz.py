"""Readiness checks: one GET, its HTTP status (:class:`rotate.clients.seams.Readyz`).

Two ways to reach a consumer: through the API server's service proxy (the default — it needs
no network path from the operator's machine to the pods, only to the API server) or a plain
URL (an ingress, a port-forward).  :class:`ReadyzRouter` picks per target, so one chain can
mix both.

Retrying is the caller's (``stages/readyz.py`` wraps this in ``wait_for``): a connection
failure is a TemporaryError, any HTTP answer — 503 included — is just a status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rotate.clients.http_errors import translated
from rotate.clients.seams import Kube, ReadyzTarget
from rotate.core.errors import TemporaryError

if TYPE_CHECKING:
    import httpx

SYSTEM = "readyz"


def _operation(target: ReadyzTarget) -> str:
    # Named by service, not URL: error messages never carry URLs.
    return f"GET readyz of {target.namespace}/{target.service}"


class ProxyReadyz:
    """``GET /api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH`` through :class:`Kube`."""

    def __init__(self, kube: Kube, *, timeout: float = 5) -> None:
        self._kube = kube
        self._timeout = timeout

    def status(self, target: ReadyzTarget) -> int:
        return self._kube.proxy_get(target.namespace, target.service, target.port, target.path,
                                    timeout=self._timeout)


class UrlReadyz:
    """A plain HTTP(S) GET of ``target.url``; redirects are not followed (a 3xx is not ready)."""

    def __init__(self, transport: httpx.BaseTransport | None = None, *,
                 timeout: float = 5) -> None:
        import httpx

        self._client = httpx.Client(transport=transport, timeout=timeout, follow_redirects=False)

    def close(self) -> None:
        self._client.close()

    def status(self, target: ReadyzTarget) -> int:
        op = _operation(target)
        if not target.url:
            raise TemporaryError(SYSTEM, op, "no URL configured")
        with translated(SYSTEM, op):
            response = self._client.get(target.url)
        return int(response.status_code)


class ReadyzRouter:
    """URL targets to :class:`UrlReadyz`, the rest through the service proxy."""

    def __init__(self, kube: Kube, *, transport: httpx.BaseTransport | None = None,
                 timeout: float = 5) -> None:
        self._proxy = ProxyReadyz(kube, timeout=timeout)
        self._transport = transport
        self._timeout = timeout
        self._url: UrlReadyz | None = None  # built on first URL target: httpx import is lazy

    def status(self, target: ReadyzTarget) -> int:
        if target.url:
            if self._url is None:
                self._url = UrlReadyz(self._transport, timeout=self._timeout)
            return self._url.status(target)
        return self._proxy.status(target)
