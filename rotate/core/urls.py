"""URLs as `rotate` shows them: without what may carry a credential.

An address typed by an operator (``BAO_ADDR``, a Config Center URL, a readyz URL) can hold
``user:pass@`` or a token in its query string.  Every message that names an address goes
through :func:`display_url`.
"""

from __future__ import annotations


def display_url(url: str) -> str:
    """``url`` without user info and query string (fragment dropped too)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    host, slash, tail = rest.partition("/")
    path = tail.partition("?")[0].partition("#")[0]
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}"


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
