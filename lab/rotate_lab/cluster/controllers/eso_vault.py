"""ESO's Vault/OpenBao provider, as the lab's ExternalSecret controller uses it.

Reads KV v2 over plain HTTP with the token a SecretStore names.  The store's server is a
cluster DNS name (``openbao.openbao.svc.cluster.local``): it is resolved through the lab's
resolver, so the request travels through the Service's ClusterIP forwarder exactly like a
pod's would, and breaks the same way when OpenBao is down.

Invariant: a :class:`ProviderError` message is safe to put in a status condition or an
Event — built from the status code, the path and OpenBao's own ``errors`` strings, never
from returned data.  Messages follow the real provider's wording where it matters to users
("cannot read secret data from Vault", "key ... does not exist").
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

Obj = dict[str, Any]


class ProviderError(Exception):
    """The provider could not deliver; ``str()`` is safe for a condition message."""


@dataclass(frozen=True)
class VaultStore:
    """The parts of ``spec.provider.vault`` the lab honours."""

    server: str
    path: str  # KV mount, e.g. "secret"
    version: str  # "v2" (v1 is refused: the lab's OpenBao mounts KV v2)
    token_secret: tuple[str, str, str]  # namespace, name, key

    @classmethod
    def from_store(cls, store: Obj, es_namespace: str) -> VaultStore:
        spec = (store.get("spec") or {}).get("provider") or {}
        vault = spec.get("vault")
        if not isinstance(vault, dict):
            raise ProviderError("the store has no provider.vault: only Vault/OpenBao is "
                                "emulated by the lab")
        ref = ((vault.get("auth") or {}).get("tokenSecretRef")) or {}
        if not ref.get("name") or not ref.get("key"):
            raise ProviderError("provider.vault.auth.tokenSecretRef {name, key} is required")
        if not vault.get("server"):
            raise ProviderError("provider.vault.server is required")
        # A SecretStore reads only its own namespace; a ClusterSecretStore names one.
        ns = str(ref.get("namespace") or es_namespace)
        return cls(str(vault["server"]), str(vault.get("path") or "secret").strip("/"),
                   str(vault.get("version") or "v2"), (ns, str(ref["name"]), str(ref["key"])))


def _with_address(server: str, resolve: Callable[[str], str | None],
                  fallback: str | None) -> str:
    """The store's URL with its host replaced by the lab address it resolves to."""
    parts = urlsplit(server)
    host = parts.hostname or ""
    ip = resolve(host)
    if ip is not None:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return urlunsplit((parts.scheme, f"{ip}:{port}", parts.path, "", "")).rstrip("/")
    if host.endswith(".svc.cluster.local") or host.endswith(".svc"):
        if fallback:
            return fallback.rstrip("/")
        raise ProviderError(f"cannot resolve {host}: no such Service in the lab")
    return server.rstrip("/")


class VaultReader:
    """One reconcile's reader: caches each path (and version) it fetched."""

    def __init__(self, store: VaultStore, token: str, base_url: str) -> None:
        self.store = store
        self._token = token
        self._base = base_url
        self._cache: dict[tuple[str, str | None], Obj] = {}

    @classmethod
    def connect(cls, store: VaultStore, token: str, resolve: Callable[[str], str | None],
                fallback: str | None) -> VaultReader:
        if store.version != "v2":
            raise ProviderError(f"provider.vault.version {store.version!r} is not supported "
                                "by the lab (KV v2 only)")
        return cls(store, token, _with_address(store.server, resolve, fallback))

    def _data_path(self, key: str) -> str:
        key = key.strip("/")
        # Like ESO: a key that already starts with the mount is not prefixed twice.
        if key.startswith(self.store.path + "/"):
            key = key[len(self.store.path) + 1:]
        return f"{self.store.path}/data/{key}"

    def read(self, key: str, version: str | None = None) -> Obj:
        """The data map of KV v2 ``key`` (latest, or ``version``)."""
        cached = self._cache.get((key, version))
        if cached is not None:
            return cached
        import httpx

        path = self._data_path(key)
        params = {"version": version} if version else None
        try:
            r = httpx.get(f"{self._base}/v1/{quote(path)}", params=params, timeout=5.0,
                          headers={"X-Vault-Token": self._token})
        except httpx.HTTPError as exc:
            raise ProviderError(f"cannot read secret data from Vault: {self.store.server} is "
                                f"unreachable ({type(exc).__name__})") from None
        if r.status_code == 404:
            raise ProviderError(f"cannot read secret data from Vault: Secret does not exist "
                                f"at {path}")
        if r.status_code != 200:
            raise ProviderError(f"cannot read secret data from Vault: {path}: HTTP "
                                f"{r.status_code}{_vault_errors(r)}")
        try:
            body = r.json()
            data = body["data"]["data"]
        except (ValueError, KeyError, TypeError):
            raise ProviderError(f"cannot read secret data from Vault: {path}: "
                                "unexpected answer") from None
        if data is None:  # a deleted (soft) version
            raise ProviderError(f"cannot read secret data from Vault: Secret does not exist "
                                f"at {path} (version deleted)")
        self._cache[(key, version)] = dict(data)
        return dict(data)

    def value(self, key: str, prop: str | None, version: str | None) -> bytes:
        """One ``remoteRef``: a property of the secret, or the whole map as JSON."""
        data = self.read(key, version)
        if not prop:
            return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        if prop not in data:
            raise ProviderError(f"key {prop} does not exist in secret {key}")
        return _as_bytes(data[prop])


def _as_bytes(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode()
    return json.dumps(v, sort_keys=True, separators=(",", ":")).encode()


def _vault_errors(r: Any) -> str:
    """OpenBao's ``errors`` strings ("permission denied") — they name causes, not data."""
    try:
        errs = r.json().get("errors") or []
    except ValueError:
        return ""
    text = "; ".join(str(e) for e in errs if isinstance(e, str))[:200]
    return f": {text}" if text else ""


def token_from_secret(secret: Obj, key: str) -> str:
    raw = (secret.get("data") or {}).get(key)
    if not raw:
        raise ProviderError(f"cannot get Kubernetes secret "
                            f"{secret['metadata'].get('name')!r}: key {key!r} is missing")
    try:
        return base64.b64decode(raw).decode().strip()
    except (ValueError, UnicodeDecodeError):
        raise ProviderError("the token Secret's value is not valid base64 text") from None
