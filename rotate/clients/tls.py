"""TLS failures, told apart from "unreachable" and worded with the setting that fixes them.

Every HTTP library wraps the ``ssl`` error differently (requests' SSLError around urllib3's
MaxRetryError around ssl.SSLCertVerificationError; httpx's ConnectError with the ssl error as
``__context__``; urllib3 alone as MaxRetryError.reason).  :func:`tls_failure` walks the chain
(``reason``, ``__cause__``, ``__context__``) to the ssl error; the message is built here from
what the adapter knows — never from the library's text.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rotate.core.errors import UsageError
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


# --------------------------------------------------------------------------- client settings


@dataclass(frozen=True)
class TlsSettings:
    """How a client verifies a server and presents itself, as the vault CLI's VAULT_CACERT,
    VAULT_CAPATH, VAULT_CLIENT_CERT/KEY, VAULT_TLS_SERVER_NAME and VAULT_SKIP_VERIFY say.

    ``names`` maps each field to the variable it came from, so a file that cannot be loaded
    is reported with the setting to fix.
    """

    ca_file: str | None = None
    ca_path: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    server_name: str | None = None
    skip_verify: bool = False
    names: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_default(self) -> bool:
        return self == TlsSettings(names=self.names)

    @property
    def ca_setting(self) -> str:
        """What to set when verification fails (the wording of a TLS failure)."""
        if self.ca_file or self.ca_path:
            where = self.ca_file or self.ca_path
            name = self.names.get("ca_file" if self.ca_file else "ca_path", "the CA setting")
            return f"the CA in {name} ({where}) did not sign its certificate"
        return (f"set {self.names.get('ca_file', 'a CA file')} to the CA file that signed its "
                "certificate")


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """An SSL context from ``settings``; UsageError naming the variable when a file is
    missing or not PEM.  The host name is checked against ``server_name`` when the caller
    passes it as the TLS server name (SNI), else against the address's host."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if settings.skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    names = settings.names
    if settings.ca_file:
        _load(ctx, settings.ca_file, names.get("ca_file", "the CA file"))
    if settings.ca_path:
        _load_dir(ctx, settings.ca_path, names.get("ca_path", "the CA directory"))
    if not (settings.ca_file or settings.ca_path) and not settings.skip_verify:
        import certifi  # what requests and httpx trust by default

        ctx.load_verify_locations(cafile=certifi.where())
    if settings.client_cert or settings.client_key:
        cert_name = names.get("client_cert", "the client certificate")
        key_name = names.get("client_key", "the client key")
        if not (settings.client_cert and settings.client_key):
            raise UsageError(f"{cert_name} and {key_name} go together: set both")
        try:
            ctx.load_cert_chain(settings.client_cert, settings.client_key)
        except (OSError, ssl.SSLError):
            raise UsageError(f"cannot load the client certificate {settings.client_cert} "
                             f"({cert_name}) with its key ({key_name})") from None
    return ctx


def unused_context() -> ssl.SSLContext:
    """For a client that never speaks TLS (an ``http://`` base URL, redirects not followed):
    httpx builds its default context — the CA bundle loaded, ~35 ms of CPU at every start —
    even then.  This one loads nothing and verifies as strictly: were it ever used, it would
    trust no certificate (fail closed)."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _load(ctx: ssl.SSLContext, path: str, name: str) -> None:
    try:
        ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError):
        raise UsageError(f"cannot load CA certificates from {path} ({name})") from None


def _load_dir(ctx: ssl.SSLContext, path: str, name: str) -> None:
    """Every file in the directory, as the vault CLI reads VAULT_CAPATH (no hashed names
    needed, unlike OpenSSL's capath)."""
    directory = Path(path)
    if not directory.is_dir():
        raise UsageError(f"{path} ({name}) is not a directory")
    files = sorted(p for p in directory.iterdir() if p.is_file())
    if not files:
        raise UsageError(f"{path} ({name}) holds no CA certificate")
    for file in files:
        _load(ctx, str(file), name)
