"""URLs as `rotate` shows them: without what may carry a credential.

An address typed by an operator (``BAO_ADDR``, a Config Center URL, a readyz URL) can hold
``user:pass@`` or a token in its query string.  Every message that names an address goes
through :func:`display_url`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

#: ``scheme://`` at the start (RFC 3986: a letter, then letters, digits, ``+ - .``)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: what is shown for an address the standard parser refuses (an unclosed ``[`` of IPv6)
UNPARSEABLE = "(an address that does not parse)"


def display_url(url: str) -> str:
    """``url`` as ``scheme://host[:port]/path``: user info, query string and fragment dropped.

    Parsed by :func:`urllib.parse.urlsplit` (RFC 3986), the way the HTTP clients read it:
    the authority ends at the first ``/``, ``?`` or ``#``, so a query right after the port
    (``http://h:9?token=…``) never reaches the display.  An address without a scheme
    (``host:8200?token=…``) is read as an authority, not as ``host:`` scheme.  An address the
    parser refuses is not shown at all."""
    scheme = _SCHEME.match(url) is not None
    try:
        parts = urlsplit(url if scheme else f"//{url}")
    except ValueError:
        return UNPARSEABLE
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}" if scheme else f"{host}{parts.path}"


def plain_remote_host(url: str) -> str | None:
    """The host of a plain ``http://`` URL that is not loopback (a bearer token sent there
    crosses the network in clear), else None."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return None
    if parts.scheme.lower() != "http" or not host:
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    return host
