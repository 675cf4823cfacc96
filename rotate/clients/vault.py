"""OpenBao/Vault KV v2 through hvac: the :class:`rotate.clients.seams.Vault` adapter.

Invariants:

* Secret values cross this module only as :class:`Secret`; they are revealed in exactly one
  place, the body of :meth:`HvacVault.write`.
* hvac and requests exceptions carry the request URL and often the response body; they are
  caught at every call and replaced by a :mod:`rotate.core.errors` error built from the
  operation, the path and the status code (``from None``, so not even the traceback's
  ``__context__`` keeps them).
* Login (kubernetes / approle) happens on first use, not in the constructor, so building the
  adapter never fails and preflight reports an auth failure like any other check.

hvac is imported in the constructor: ``rotate --help`` must not pay for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rotate.clients.seams import KvMetadata, KvVersion, VaultToken
from rotate.clients.tls import TlsSettings, client_context, tls_failure, tls_reason
from rotate.core.errors import (
    ClientError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PermanentError,
    TemporaryError,
    UsageError,
    error_for_status,
)
from rotate.core.secret import Secret
from rotate.core.urls import display_url, plain_remote_host

if TYPE_CHECKING:
    from rotate.chain.sections import BackendConfig

SYSTEM = "vault"
T = TypeVar("T")
_CA_NAMES = {"ca_file": "BAO_CACERT/VAULT_CACERT"}


# --------------------------------------------------------------------------- auth methods


@dataclass(frozen=True)
class TokenAuth:
    token: Secret


#: the kubelet's ServiceAccount token path (the chain file's ``jwtPath`` default too)
DEFAULT_JWT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@dataclass(frozen=True)
class KubernetesAuth:
    role: str
    jwt_path: str = DEFAULT_JWT_PATH
    mount: str = "kubernetes"


@dataclass(frozen=True)
class AppRoleAuth:
    role_id: Secret
    secret_id: Secret = field(repr=False)
    mount: str = "approle"


VaultAuth = TokenAuth | KubernetesAuth | AppRoleAuth


# --------------------------------------------------------------------------- errors

# hvac's exception classes by the status code they stand for (hvac.exceptions.VaultError
# .from_status); looked up by name so this table needs no hvac import.
_HVAC_STATUS = {
    "InvalidRequest": 400, "Unauthorized": 401, "Forbidden": 403, "InvalidPath": 404,
    "PreconditionFailed": 412, "RateLimitExceeded": 429, "InternalServerError": 500,
    "VaultNotInitialized": 501, "BadGateway": 502, "VaultDown": 503,
}


def _is_cas_mismatch(errors: Any) -> bool:
    """KV v2 answers a check-and-set mismatch with 400 and this phrase (Vault and OpenBao)."""
    return isinstance(errors, list) and any("check-and-set" in str(e) for e in errors)


def _translate(exc: Exception, operation: str, address: str = "",
               tls_settings: TlsSettings | None = None) -> ClientError:
    import requests
    from hvac import exceptions as hx

    if isinstance(exc, hx.VaultError):
        status = _HVAC_STATUS.get(type(exc).__name__)
        if status == 400 and _is_cas_mismatch(exc.errors):
            return ConflictError(SYSTEM, operation, "check-and-set: the version moved",
                                 status=400)
        if status == 503:
            return TemporaryError(SYSTEM, operation, "sealed or unavailable", status=503)
        if status is None:
            return PermanentError(SYSTEM, operation, "unexpected answer")
        return error_for_status(status, SYSTEM, operation)
    if isinstance(exc, requests.exceptions.Timeout):
        return TemporaryError(SYSTEM, operation, "timed out")
    if isinstance(exc, requests.exceptions.InvalidURL | requests.exceptions.MissingSchema
                  | requests.exceptions.InvalidSchema):
        return PermanentError(SYSTEM, operation, "the address is not a valid URL")
    tls = tls_failure(exc)
    if tls is not None:
        settings = tls_settings or TlsSettings(names=_CA_NAMES)
        return PermanentError(SYSTEM, operation, tls_reason(tls, address, settings.ca_setting))
    if isinstance(exc, requests.exceptions.RequestException):
        return TemporaryError(SYSTEM, operation, f"unreachable at {display_url(address)}"
                              if address else "unreachable")
    if isinstance(exc, OSError):
        return PermanentError(SYSTEM, operation, "cannot read a local credential file")
    return PermanentError(SYSTEM, operation, "unexpected answer")


# --------------------------------------------------------------------------- TLS


def _tls_session(settings: TlsSettings) -> Any:
    """A requests Session whose HTTPS connections use one SSL context built from
    ``settings`` (CA file and directory, client certificate, verification off) and send
    ``server_name`` as SNI and check the certificate against it (VAULT_TLS_SERVER_NAME)."""
    import requests
    from requests.adapters import HTTPAdapter

    context = client_context(settings)
    cert_reqs = "CERT_NONE" if settings.skip_verify else "CERT_REQUIRED"
    if settings.skip_verify:  # vault_from_env warned once; not urllib3 on every request
        import warnings

        from urllib3.exceptions import InsecureRequestWarning

        warnings.filterwarnings("ignore", category=InsecureRequestWarning)

    pool: dict[str, Any] = {"ssl_context": context, "cert_reqs": cert_reqs}
    if settings.server_name:
        pool["server_hostname"] = settings.server_name

    class TlsAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **{**kwargs, **pool})  # requests < 2.32.2

        def build_connection_pool_key_attributes(
            self, request: Any, verify: Any, cert: Any = None
        ) -> Any:
            host, _ = super().build_connection_pool_key_attributes(request, verify, cert)
            return host, dict(pool)

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            """Everything is in the context: requests must not add its own CA bundle."""

    session = requests.Session()
    session.mount("https://", TlsAdapter())
    return session


# --------------------------------------------------------------------------- the adapter


class HvacVault:
    """KV v2 at one mount. Paths are relative to the mount (``infra/dragonfly``)."""

    def __init__(
        self,
        address: str,
        auth: Secret | VaultAuth,
        mount: str = "secret",
        namespace: str | None = None,
        ca_cert: str | None = None,
        *,
        tls: TlsSettings | None = None,
        timeout: float = 10,
    ) -> None:
        import hvac

        self._address = address.rstrip("/")
        self._auth: VaultAuth = TokenAuth(auth) if isinstance(auth, Secret) else auth
        self._mount = mount.strip("/")
        self._logged_in = isinstance(self._auth, TokenAuth)
        self._tls = tls or TlsSettings(ca_file=ca_cert, names=_CA_NAMES)
        token = self._auth.token.reveal() if isinstance(self._auth, TokenAuth) else None
        # The JSON adapter turns a 200 into a dict and drops the status; raw requests below go
        # through the parent class's method to keep the Response.
        self._raw_request = hvac.adapters.RawAdapter.request
        session = None if self._tls.is_default else _tls_session(self._tls)
        self._client = hvac.Client(url=self._address, token=token, namespace=namespace or None,
                                   verify=True, timeout=timeout, session=session)

    def _translate(self, exc: Exception, operation: str) -> ClientError:
        return _translate(exc, operation, self._address, self._tls)

    def __repr__(self) -> str:
        return f"HvacVault({display_url(self._address)!r}, mount={self._mount!r})"

    @property
    def address(self) -> str:
        return self._address

    @property
    def mount(self) -> str:
        return self._mount

    def _do(self, operation: str, fn: Callable[[Any], T]) -> T:
        """``fn(hvac_client)`` after login; whatever it raises is translated.

        A login-based token (kubernetes, approle) may expire during a long run: a 403 on a
        token that was not minted for this very call triggers one fresh login and one retry.
        """
        for attempt in (1, 2):
            fresh = not self._logged_in
            try:
                if fresh:
                    self._login()
                return fn(self._client)
            except Exception as exc:  # every library failure: translated, its text dropped
                err = exc if isinstance(exc, ClientError) else self._translate(exc, operation)
                relogin = not isinstance(self._auth, TokenAuth) and not fresh and attempt == 1
                if isinstance(err, ForbiddenError) and relogin:
                    self._logged_in = False
                    continue
                raise err from None
        raise AssertionError("unreachable")  # the loop returns or raises

    def _login(self) -> None:
        auth = self._auth
        if isinstance(auth, KubernetesAuth):
            jwt = Path(auth.jwt_path).read_text(encoding="utf-8").strip()
            self._client.auth.kubernetes.login(role=auth.role, jwt=jwt, mount_point=auth.mount)
        elif isinstance(auth, AppRoleAuth):
            self._client.auth.approle.login(role_id=auth.role_id.reveal(),
                                            secret_id=auth.secret_id.reveal(),
                                            mount_point=auth.mount)
        self._logged_in = True

    def _raw(self, method: str, url: str, operation: str, **kwargs: Any) -> Any:
        """A request hvac has no (safe) wrapper for; the JSON answer or None (204)."""
        def call(client: Any) -> Any:
            response = self._raw_request(client.adapter, method, url, raise_exception=False,
                                         **kwargs)
            status = int(response.status_code)
            if status >= 400:
                raise error_for_status(status, SYSTEM, operation,
                                       "sealed or unavailable" if status == 503 else None)
            return response

        response = self._do(operation, call)
        status = int(response.status_code)
        if status == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise PermanentError(SYSTEM, operation, "malformed JSON in the answer") from None

    # ------------------------------------------------------------------ Vault protocol

    def health(self) -> None:
        """TemporaryError unless the server is initialised, unsealed and serving."""
        op = "health"
        try:
            response = self._raw_request(self._client.adapter, "GET", "/v1/sys/health",
                                         raise_exception=False)
        except Exception as exc:
            raise self._translate(exc, op) from None
        status = int(response.status_code)
        # 429/473: a (performance) standby — it forwards requests to the active node, so it is
        # as good as the active one for everything rotate does.
        if status in (200, 429, 473):
            return
        reason = {503: "sealed", 501: "not initialised"}.get(status, "unhealthy")
        raise TemporaryError(SYSTEM, op, reason, status=status)

    def read_metadata(self, path: str) -> KvMetadata:
        op = f"read metadata of {self._mount}/{path}"
        answer = self._do(op, lambda c: c.secrets.kv.v2.read_secret_metadata(
            path=path, mount_point=self._mount))
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict):
            raise PermanentError(SYSTEM, op, "unexpected answer")
        versions = {
            int(n): KvVersion(version=int(n), created_time=str(v.get("created_time") or ""),
                              deletion_time=str(v.get("deletion_time") or ""),
                              destroyed=bool(v.get("destroyed")))
            for n, v in (data.get("versions") or {}).items()
        }
        custom = data.get("custom_metadata") or {}
        return KvMetadata(path=path, current_version=int(data.get("current_version") or 0),
                          oldest_version=int(data.get("oldest_version") or 0),
                          versions=versions,
                          custom_metadata={str(k): str(v) for k, v in custom.items()})

    def read(self, path: str, version: int | None = None) -> dict[str, Secret]:
        where = f"{self._mount}/{path}" + (f" version {version}" if version else "")
        op = f"read {where}"
        answer = self._do(op, lambda c: c.secrets.kv.v2.read_secret_version(
            path=path, version=version, mount_point=self._mount, raise_on_deleted_version=True))
        data = (answer.get("data") or {}).get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict):
            raise PermanentError(SYSTEM, op, "unexpected answer")
        return {str(k): Secret(v if isinstance(v, str) else json.dumps(v))
                for k, v in data.items()}

    def write(self, path: str, data: Mapping[str, Secret], *, cas: int) -> int:
        op = f"write {self._mount}/{path} (cas={cas})"
        body = {k: v.reveal() for k, v in data.items()}
        answer = self._do(op, lambda c: c.secrets.kv.v2.create_or_update_secret(
            path=path, secret=body, cas=cas, mount_point=self._mount))
        version = (answer.get("data") or {}).get("version") if isinstance(answer, dict) else None
        if not isinstance(version, int):
            raise PermanentError(SYSTEM, op, "unexpected answer (no version)")
        return version

    def set_custom_metadata(self, path: str, metadata: Mapping[str, str]) -> None:
        """Merge into custom_metadata. Written with a bare metadata POST: hvac's
        ``update_metadata`` also sends ``delete_version_after`` and would reset it."""
        try:
            merged = dict(self.read_metadata(path).custom_metadata)
        except NotFoundError:  # KV v2 accepts metadata before the first version
            merged = {}
        merged.update({str(k): str(v) for k, v in metadata.items()})
        self._raw("POST", f"/v1/{self._mount}/metadata/{path}",
                  f"set custom metadata of {self._mount}/{path}",
                  json={"custom_metadata": merged})

    def capabilities(self, paths: Sequence[str]) -> dict[str, list[str]]:
        answer = self._raw("POST", "/v1/sys/capabilities-self", "check capabilities",
                           json={"paths": list(paths)})
        if not isinstance(answer, dict):
            raise PermanentError(SYSTEM, "check capabilities", "unexpected answer")
        nested = answer.get("data")
        data: dict[str, Any] = nested if isinstance(nested, dict) else answer
        out: dict[str, list[str]] = {}
        for p in paths:
            caps = data.get(p)
            if caps is None and len(paths) == 1:
                caps = data.get("capabilities")
            out[p] = [str(c) for c in caps] if isinstance(caps, list) else []
        return out

    def lookup_self(self) -> VaultToken:
        op = "look up the token"
        answer = self._do(op, lambda c: c.auth.token.lookup_self())
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict):
            raise PermanentError(SYSTEM, op, "unexpected answer")
        policies = data.get("policies") or []
        return VaultToken(ttl=int(data.get("ttl") or 0),
                         policies=tuple(str(p) for p in policies) if isinstance(
                             policies, list) else (),
                         renewable=bool(data.get("renewable")))


# --------------------------------------------------------------------------- from the environment


def _first(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = environ.get(name)
        if value:
            return value
    return None


_TRUE = ("1", "t", "true")
_FALSE = ("0", "f", "false")


def _flag(environ: Mapping[str, str], names: tuple[str, str], problems: list[str]) -> bool:
    """A boolean variable as the vault CLI parses it (Go's strconv.ParseBool)."""
    for name in names:
        value = environ.get(name)
        if value:
            if value.lower() in _TRUE:
                return True
            if value.lower() in _FALSE:
                return False
            problems.append(f"{name} must be true or false")
            return False
    return False


def tls_from_env(environ: Mapping[str, str], problems: list[str]) -> TlsSettings:
    """BAO_*/VAULT_* TLS variables (BAO_ wins), with the name each value came from."""
    values: dict[str, str | None] = {}
    names: dict[str, str] = {}
    for fld, suffix in (("ca_file", "CACERT"), ("ca_path", "CAPATH"),
                        ("client_cert", "CLIENT_CERT"), ("client_key", "CLIENT_KEY"),
                        ("server_name", "TLS_SERVER_NAME")):
        candidates = (f"BAO_{suffix}", f"VAULT_{suffix}")
        chosen = next((n for n in candidates if environ.get(n)), None)
        values[fld] = environ.get(chosen) if chosen else None
        names[fld] = chosen or " or ".join(candidates)
    skip = _flag(environ, ("BAO_SKIP_VERIFY", "VAULT_SKIP_VERIFY"), problems)
    names["skip_verify"] = next((n for n in ("BAO_SKIP_VERIFY", "VAULT_SKIP_VERIFY")
                                 if environ.get(n)), "BAO_SKIP_VERIFY")
    return TlsSettings(ca_file=values["ca_file"], ca_path=values["ca_path"],
                       client_cert=values["client_cert"], client_key=values["client_key"],
                       server_name=values["server_name"], skip_verify=skip, names=names)


def _ignore(text: str) -> None:
    """The default ``warn``: callers that show warnings pass their own."""


def vault_from_env(
    backend: BackendConfig, environ: Mapping[str, str], *, timeout: float = 10,
    serviceaccount_dir: str | None = None,
    warn: Callable[[str], None] = _ignore,
) -> HvacVault:
    """An adapter configured the way the bao/vault CLIs are: BAO_* wins over VAULT_*.

    Address: the chain file's ``addressEnv`` if set, else BAO_ADDR / VAULT_ADDR.  Token auth:
    BAO_TOKEN / VAULT_TOKEN, else ``~/.vault-token`` (the CLI's token helper file).  TLS:
    ``*_CACERT``, ``*_CAPATH``, ``*_CLIENT_CERT``/``*_CLIENT_KEY``, ``*_TLS_SERVER_NAME``,
    ``*_SKIP_VERIFY`` (a warning through ``warn``).  A token sent over plain ``http://`` to
    a host that is not loopback is warned about too.
    Kubernetes auth: the chain file's ``jwtPath``; left at its default, the token is read
    from ``serviceaccount_dir`` when given (the same directory the Kube adapter uses).
    UsageError (exit 2) listing everything missing or invalid at once — before any request.
    """
    problems: list[str] = []
    env_names = (backend.address_env,) if backend.address_env else ("BAO_ADDR", "VAULT_ADDR")
    address = _first(environ, *env_names)
    if not address:
        problems.append(f"no OpenBao/Vault address: set {' or '.join(env_names)}")
    auth = _auth_from_env(backend, environ, problems, serviceaccount_dir)
    tls = tls_from_env(environ, problems)
    if problems or not address or auth is None:
        raise UsageError("; ".join(problems))
    if tls.skip_verify:
        warn(f"{tls.names['skip_verify']} is set: "
             "the OpenBao/Vault server's certificate is not verified")
    plain = plain_remote_host(address)
    if plain:
        warn(f"the OpenBao/Vault token goes over plain http:// to {plain}, which is not "
             "loopback: use https://")
    return HvacVault(
        address, auth, backend.kv_mount,
        namespace=_first(environ, "BAO_NAMESPACE", "VAULT_NAMESPACE"),
        tls=tls, timeout=timeout,
    )


def _auth_from_env(backend: BackendConfig, environ: Mapping[str, str], problems: list[str],
                   serviceaccount_dir: str | None = None) -> Secret | VaultAuth | None:
    auth_cfg = backend.auth
    if auth_cfg.method == "token":
        token = _first(environ, "BAO_TOKEN", "VAULT_TOKEN")
        home = environ.get("HOME")
        if not token and home:
            try:
                token = (Path(home) / ".vault-token").read_text(encoding="utf-8").strip()
            except OSError:
                token = None
        if not token:
            problems.append("no OpenBao/Vault token: set BAO_TOKEN or VAULT_TOKEN")
            return None
        return Secret(token)
    if auth_cfg.method == "kubernetes":
        jwt_path = auth_cfg.jwt_path
        if serviceaccount_dir and jwt_path == DEFAULT_JWT_PATH:
            jwt_path = f"{serviceaccount_dir}/token"
        return KubernetesAuth(role=auth_cfg.role or "", jwt_path=jwt_path,
                              mount=auth_cfg.mount_path)
    names = (auth_cfg.role_id_env or "", auth_cfg.secret_id_env or "")
    role_id, secret_id = (environ.get(n) for n in names)
    if not role_id or not secret_id:
        problems.append(f"approle auth needs {names[0]} and {names[1]} in the environment")
        return None
    return AppRoleAuth(role_id=Secret(role_id), secret_id=Secret(secret_id),
                       mount=auth_cfg.mount_path)
