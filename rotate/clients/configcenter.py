"""The Config Center client (config-center-api.md) over httpx.

Invariants:

* The admin token and every document body are revealed only when the request is serialised;
  nothing this module raises contains either, nor a URL or a response body: errors are built
  from the operation, the status code and the server's short ``error`` code at most.
* A 422's ``details`` are passed on (path, message) because they tell the operator which
  field of which document the schema refused, but any secret leaf of the document we sent is
  masked out of the messages first: a schema validator happily quotes the failing instance.
* Optimistic concurrency is the caller's: ``put_key`` always sends ``If-Match`` (or
  ``If-None-Match: *`` to create), so a concurrent writer surfaces as ConflictError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from rotate.clients.seams import MintedToken, TokenInfo, VersionedDoc
from rotate.clients.tls import (
    TlsSettings,
    client_context,
    tls_failure,
    tls_reason,
    unused_context,
)
from rotate.core.errors import (
    ClientError,
    ConflictError,
    NotFoundError,
    PermanentError,
    RejectedError,
    TemporaryError,
    UsageError,
    error_for_status,
)
from rotate.core.secret import Secret, reveal_tree
from rotate.core.urls import display_url

if TYPE_CHECKING:
    import httpx

SYSTEM = "config center"
#: the CA file that signed the Config Center's certificate (besides SSL_CERT_FILE)
CA_ENV = "CONFIG_CENTER_CACERT"
_CA_NAMES = {"ca_file": CA_ENV}


def _seg(text: str) -> str:
    return quote(text, safe="")


def _secret_leaves(value: Any) -> Iterator[Secret]:
    if isinstance(value, Secret):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _secret_leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _secret_leaves(v)


class HttpConfigCenter:
    """:class:`rotate.clients.seams.ConfigCenter` over HTTP(S) with an admin bearer token."""

    def __init__(
        self,
        url: str,
        admin_token: Secret,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 10,
        ca_file: str | None = None,
    ) -> None:
        import httpx

        self._url = url.rstrip("/")
        self._token = admin_token
        self._httpx = httpx
        self._ca_file = ca_file
        verify: Any = True
        if ca_file:
            verify = client_context(TlsSettings(ca_file=ca_file, names=_CA_NAMES))
        elif self._url.lower().startswith("http://"):
            verify = unused_context()  # no TLS at all: base URL fixed, no redirects
        try:
            self._client = httpx.Client(base_url=self._url, transport=transport,
                                        timeout=timeout, follow_redirects=False, verify=verify)
        except httpx.InvalidURL:
            raise UsageError("the Config Center URL is not a valid URL") from None

    def __repr__(self) -> str:
        return f"HttpConfigCenter({display_url(self._url)!r})"

    @property
    def url(self) -> str:
        return self._url

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpConfigCenter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def _request(
        self,
        method: str,
        path: str,
        operation: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        auth: bool = True,
        secrets: tuple[Secret, ...] = (),
    ) -> httpx.Response:
        httpx = self._httpx
        hdrs = dict(headers or {})
        if auth:
            hdrs["Authorization"] = "Bearer " + self._token.reveal()
        content = None
        if body is not None:
            content = json.dumps(reveal_tree(body)).encode()
            hdrs["Content-Type"] = "application/json"
        try:
            response = self._client.request(method, path, content=content, headers=hdrs)
        except httpx.InvalidURL:
            raise PermanentError(SYSTEM, operation, "not a valid URL") from None
        except httpx.UnsupportedProtocol:
            raise PermanentError(SYSTEM, operation, "the URL scheme is not http(s)") from None
        except httpx.TimeoutException:
            raise TemporaryError(SYSTEM, operation, "timed out") from None
        except httpx.TransportError as exc:
            tls = tls_failure(exc)
            if tls is not None:
                setting = (f"the CA in {CA_ENV} ({self._ca_file}) did not sign its certificate"
                           if self._ca_file else
                           f"set {CA_ENV} (or SSL_CERT_FILE / SSL_CERT_DIR) to the CA bundle "
                           "that signed the Config Center's certificate")
                raise PermanentError(SYSTEM, operation, tls_reason(tls, self._url,
                                                                   setting)) from None
            raise TemporaryError(SYSTEM, operation,
                                 f"unreachable at {display_url(self._url)}") from None
        except httpx.HTTPError:
            raise TemporaryError(SYSTEM, operation, "request failed") from None
        if response.status_code >= 400:
            raise self._error(response, operation, secrets)
        return response

    def _error(
        self, response: httpx.Response, operation: str, secrets: tuple[Secret, ...]
    ) -> ClientError:
        status = response.status_code
        payload = self._body(response)
        code = payload.get("error") if isinstance(payload, dict) else None
        if status == 422:
            details = []
            raw = payload.get("details") if isinstance(payload, dict) else None
            for item in raw if isinstance(raw, list) else []:
                if isinstance(item, dict):
                    details.append((str(item.get("path", "")),
                                    _scrub(str(item.get("message", "")), secrets)))
            reason = "the document does not match the service's schema" if code == "schema" \
                else "rejected"
            return RejectedError(SYSTEM, operation, reason, status=status, details=details)
        if status == 412:
            return error_for_status(status, SYSTEM, operation, "the version moved (If-Match)")
        if status == 401:
            return error_for_status(status, SYSTEM, operation, "the admin token was refused")
        return error_for_status(status, SYSTEM, operation)

    @staticmethod
    def _body(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            return None

    def _json(self, response: httpx.Response, operation: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise PermanentError(SYSTEM, operation, "malformed JSON in the answer",
                                 status=response.status_code) from None

    def _object(self, response: httpx.Response, operation: str) -> dict[str, Any]:
        data = self._json(response, operation)
        if not isinstance(data, dict):
            raise PermanentError(SYSTEM, operation, "unexpected answer (not a JSON object)",
                                 status=response.status_code)
        return data

    # ------------------------------------------------------------------ API

    def health(self) -> None:
        self._request("GET", "/healthz", "health", auth=False)

    def services(self) -> list[str]:
        op = "list services"
        data = self._object(self._request("GET", "/v1/services", op), op)
        names = data.get("services")
        if not isinstance(names, list):
            raise PermanentError(SYSTEM, op, "unexpected answer (no services list)")
        return [str(n) for n in names]

    def get_schema(self, service: str) -> dict[str, Any]:
        op = f"get schema of {service}"
        return self._object(self._request("GET", f"/v1/services/{_seg(service)}/schema", op), op)

    def put_schema(self, service: str, schema: Mapping[str, Any]) -> None:
        """Store or replace a service's JSON Schema (used by the lab's seeding and tests)."""
        op = f"put schema of {service}"
        self._request("PUT", f"/v1/services/{_seg(service)}/schema", op, body=dict(schema))

    def _doc(self, response: httpx.Response, operation: str) -> VersionedDoc:
        data = self._object(response, operation)
        version, value = data.get("version"), data.get("value")
        if not isinstance(version, int) or isinstance(version, bool) \
                or not isinstance(value, dict):
            raise PermanentError(SYSTEM, operation, "unexpected answer (no value/version)")
        return VersionedDoc(version=version, value=value)

    def get_version_number(self, service: str, key: str) -> int | None:
        try:
            return self.get_key(service, key).version
        except NotFoundError:
            return None

    def get_key(self, service: str, key: str) -> VersionedDoc:
        op = f"get {service}/{key}"
        path = f"/v1/services/{_seg(service)}/keys/{_seg(key)}"
        return self._doc(self._request("GET", path, op), op)

    def get_version(self, service: str, key: str, version: int) -> VersionedDoc:
        op = f"get {service}/{key} version {version}"
        path = f"/v1/services/{_seg(service)}/keys/{_seg(key)}/versions/{int(version)}"
        return self._doc(self._request("GET", path, op), op)

    def put_key(
        self, service: str, key: str, value: Mapping[str, Any], *, if_match: int | None
    ) -> int:
        op = f"put {service}/{key}"
        headers = {"If-None-Match": "*"} if if_match is None else {"If-Match": f'"{int(if_match)}"'}
        path = f"/v1/services/{_seg(service)}/keys/{_seg(key)}"
        response = self._request("PUT", path, op, body={"value": value}, headers=headers,
                                 secrets=tuple(_secret_leaves(value)))
        version = self._object(response, op).get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise PermanentError(SYSTEM, op, "unexpected answer (no version)")
        return version

    def restore_version(self, service: str, key: str, version: int, *, if_match: int) -> int:
        """Write version ``version``'s content as a new version. The content never leaves this
        method; every string leaf is wrapped so a 422 cannot quote it back."""
        old = self.get_version(service, key, version)
        return self.put_key(service, key, _wrap_strings(old.value), if_match=if_match)

    def probe_write(self, service: str, key: str) -> None:
        op = f"write probe {service}/{key}"
        path = f"/v1/services/{_seg(service)}/keys/{_seg(key)}"
        try:
            self._request("PUT", path, op, body={"value": {}}, headers={"If-Match": '"0"'})
        except (ConflictError, RejectedError):
            return  # 412/422: the write was authorised and reached the document; nothing changed
        raise PermanentError(SYSTEM, op, "the Config Center accepted a write If-Match a version "
                                         "that cannot exist (it ignores If-Match)")

    def mint_token(self, service: str, label: str | None = None) -> MintedToken:
        op = f"mint token for {service}"
        body = {"label": label} if label is not None else None
        data = self._object(self._request("POST", f"/v1/services/{_seg(service)}/tokens", op,
                                          body=body), op)
        tid, token, expires = data.get("id"), data.get("token"), data.get("expires_at", "")
        if not isinstance(tid, str) or not isinstance(token, str):
            raise PermanentError(SYSTEM, op, "unexpected answer (no id/token)")
        return MintedToken(id=tid, token=Secret(token), expires_at=str(expires))

    def list_tokens(self, service: str) -> list[TokenInfo]:
        op = f"list tokens of {service}"
        data = self._json(self._request("GET", f"/v1/services/{_seg(service)}/tokens", op), op)
        if isinstance(data, dict):  # tolerate {"tokens": [...]}
            data = data.get("tokens")
        if not isinstance(data, list):
            raise PermanentError(SYSTEM, op, "unexpected answer (not a list)")
        return [
            TokenInfo(id=str(t.get("id", "")), created_at=str(t.get("created_at", "")),
                      revoked=bool(t.get("revoked", False)),
                      label=str(t["label"]) if isinstance(t.get("label"), str) else None)
            for t in data if isinstance(t, dict)
        ]

    def revoke_token(self, service: str, token_id: str) -> None:
        op = f"revoke token {token_id} of {service}"
        self._request("DELETE", f"/v1/services/{_seg(service)}/tokens/{_seg(token_id)}", op)


def _wrap_strings(value: Any) -> Any:
    if isinstance(value, str):
        return Secret(value)
    if isinstance(value, Mapping):
        return {k: _wrap_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wrap_strings(v) for v in value]
    return value


#: a secret fragment this long left in a message after masking withholds the whole message
_FRAGMENT = 8


def _scrub(message: str, secrets: tuple[Secret, ...]) -> str:
    """``message`` with every secret of the request replaced by its mask (longest first, so a
    URL holding a password is masked whole before the password alone).

    Validators quote the instance as ``repr`` (Python) or JSON, which escapes quotes and
    backslashes, and may cut a long instance short: the escaped spellings are masked too,
    and a message still holding any fragment of a secret is withheld entirely.
    """
    ordered = sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True)
    for secret in ordered:
        plain = secret.reveal()
        for spelling in (plain, repr(plain)[1:-1], json.dumps(plain)[1:-1]):
            message = message.replace(spelling, secret.mask())
    for secret in ordered:
        plain = secret.reveal()
        if any(plain[i:i + _FRAGMENT] in message for i in range(len(plain) - _FRAGMENT + 1)):
            return "rejected (the message quoted a secret value; withheld)"
    return message
