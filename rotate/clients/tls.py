"""TLS failures, told apart from "unreachable" and worded with the setting that fixes them.

Every HTTP library wraps the ``ssl`` error differently (requests' SSLError around urllib3's
MaxRetryError around ssl.SSLCertVerificationError; httpx's ConnectError with the ssl error as
``__context__``; urllib3 alone as MaxRetryError.reason).  :func:`tls_failure` walks the chain
(``reason``, ``__cause__``, ``__context__``) to the ssl error; the message is built here from
what the adapter knows — never from the library's text.
"""

from __future__ import annotations

import ssl

from rotate.core.urls import display_url


def tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The ssl error at the root of ``exc``, if that is what it is."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLError):
            return current
        for nxt in (getattr(current, "reason", None), current.__cause__, current.__context__,
                    *getattr(current, "args", ())):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return None


def tls_reason(error: ssl.SSLError, address: str, ca_setting: str) -> str:
    """``TLS verification failed for https://host:port: <what to set>``."""
    what = ("TLS verification failed" if isinstance(error, ssl.SSLCertVerificationError)
            else "TLS handshake failed")
    return f"{what} for {display_url(address)}: {ca_setting}"
