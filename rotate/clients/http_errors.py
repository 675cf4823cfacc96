"""httpx's errors as rotate's, for the plain-HTTP adapters (readyz, webhooks, PromQL): one
table, so that every such adapter says the same three things the same way.

Only the kind of failure is kept — never the exception's text, which carries the URL (it may
hold credentials) or what a server sent.  An address httpx cannot use is permanent (asking
again cannot fix it); a timeout or any other transport failure is temporary.  HTTP statuses
are the caller's: what a 4xx means differs from one protocol to the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rotate.core.errors import PermanentError, TemporaryError


@contextmanager
def translated(system: str, operation: str) -> Iterator[None]:
    """Raise httpx's transport errors inside the block as rotate's, without their text."""
    import httpx

    try:
        yield
    except (httpx.InvalidURL, httpx.UnsupportedProtocol):
        raise PermanentError(system, operation, "not a valid http(s) URL") from None
    except httpx.TimeoutException:
        raise TemporaryError(system, operation, "timed out") from None
    except httpx.HTTPError:
        raise TemporaryError(system, operation, "unreachable") from None
