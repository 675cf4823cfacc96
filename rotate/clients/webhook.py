"""One JSON POST to a webhook (httpx): the delivery the run's notifier retries.

Errors are translated without the library's text or the address: a webhook URL may carry a
token (a Slack webhook's path is one), so a message names neither.  An answer 2xx is
delivered; 408, 429 and 5xx, a timeout or a refused connection are TemporaryErrors (worth
another attempt); any other answer is a PermanentError.  Redirects are not followed: a
redirected POST would reach an address nobody configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rotate.clients.http_errors import translated
from rotate.core.errors import PermanentError, TemporaryError

if TYPE_CHECKING:
    import httpx

SYSTEM = "webhook"
OPERATION = "POST"

#: answers after which another attempt may succeed
RETRIED_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class WebhookClient:
    """Posts JSON documents; one client (one connection pool) per run."""

    def __init__(self, transport: httpx.BaseTransport | None = None) -> None:
        import httpx

        self._client = httpx.Client(transport=transport, follow_redirects=False,
                                    headers={"User-Agent": "rotate"})

    def close(self) -> None:
        self._client.close()

    def post(self, url: str, document: Mapping[str, Any], timeout: float) -> None:
        """POST ``document`` as JSON within ``timeout`` seconds (connect and read)."""
        with translated(SYSTEM, OPERATION):
            response = self._client.post(url, json=dict(document), timeout=timeout)
        status = response.status_code
        if 200 <= status < 300:
            return
        if status in RETRIED_STATUSES:
            raise TemporaryError(SYSTEM, OPERATION, "refused for now", status=status)
        raise PermanentError(SYSTEM, OPERATION, "refused", status=status)
