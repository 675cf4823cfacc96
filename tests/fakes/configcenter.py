"""A fake of the ConfigCenter seam: versioned documents (If-Match), machine tokens."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from rotate.clients.seams import (
    MintedToken,
    TokenInfo,
    VersionedDoc,
)
from rotate.core.errors import ConflictError, NotFoundError
from rotate.core.secret import Secret, reveal_tree
from tests.fakes.faults import Faults


class FakeConfigCenter:
    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.tokens: dict[str, list[dict[str, Any]]] = {}
        self.faults = Faults()
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:8080"

    def health(self) -> None:
        self.faults.hit("health")

    def services(self) -> list[str]:
        return sorted({s for s, _ in self.docs})

    def get_schema(self, service: str) -> dict[str, Any]:
        return {}

    def get_version_number(self, service: str, key: str) -> int | None:
        vs = self.docs.get((service, key))
        return len(vs) if vs else None

    def get_key(self, service: str, key: str) -> VersionedDoc:
        vs = self.docs.get((service, key))
        if not vs:
            raise NotFoundError("config center", f"get {service}/{key}", "not found", status=404)
        return VersionedDoc(len(vs), copy.deepcopy(vs[-1]))

    def get_version(self, service: str, key: str, version: int) -> VersionedDoc:
        vs = self.docs.get((service, key)) or []
        if not 1 <= version <= len(vs):
            raise NotFoundError("config center", f"get {service}/{key} version {version}",
                                "not found", status=404)
        return VersionedDoc(version, copy.deepcopy(vs[version - 1]))

    def put_key(self, service: str, key: str, value: Mapping[str, Any], *,
                if_match: int | None) -> int:
        self.faults.hit("put_key")
        vs = self.docs.setdefault((service, key), [])
        if (if_match is None and vs) or (if_match is not None and if_match != len(vs)):
            raise ConflictError("config center", f"put {service}/{key}", "version moved",
                                status=412)
        vs.append(reveal_tree(dict(value)))
        self.faults.hit("put_key_applied")  # e.g. a timeout after the server applied it
        return len(vs)

    def restore_version(self, service: str, key: str, version: int, *, if_match: int) -> int:
        old = self.get_version(service, key, version).value
        return self.put_key(service, key, old, if_match=if_match)

    def probe_write(self, service: str, key: str) -> None:
        self.faults.hit("probe_write")

    def mint_token(self, service: str, label: str | None = None) -> MintedToken:
        self.faults.hit("mint_token")
        tid = f"tok-{next(self._ids)}"
        value = f"secret-token-{tid}-xyzzy"
        self.tokens.setdefault(service, []).append({"id": tid, "token": value, "revoked": False,
                                                    "label": label})
        self.faults.hit("mint_token_applied")  # e.g. killed between minting and journaling
        return MintedToken(tid, Secret(value), "2027-01-01T00:00:00Z")

    def list_tokens(self, service: str) -> list[TokenInfo]:
        return [TokenInfo(t["id"], "2026-01-01T00:00:00Z", t["revoked"], t.get("label"))
                for t in self.tokens.get(service, [])]

    def revoke_token(self, service: str, token_id: str) -> None:
        for t in self.tokens.get(service, []):
            if t["id"] == token_id:
                t["revoked"] = True
                return
        raise NotFoundError("config center", "revoke", "not found", status=404)

    def valid_token(self, service: str, value: str) -> bool:
        return any(t["token"] == value and not t["revoked"] for t in self.tokens.get(service, []))
