"""A fake of the Vault seam: KV v2 versions with check-and-set, capabilities, the token.

``token_expired`` stands for a token OpenBao no longer knows (expired, revoked, mistyped):
every authenticated call is refused with 403, as the real server does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rotate.clients.seams import (
    KvMetadata,
    KvVersion,
    VaultToken,
)
from rotate.core.errors import ConflictError, ForbiddenError, NotFoundError
from rotate.core.secret import Secret
from tests.fakes.faults import Faults

# --------------------------------------------------------------------------- Vault


class FakeVault:
    def __init__(self, mount: str = "secret") -> None:
        self.mount = mount
        self.versions: dict[str, list[dict[str, str]]] = {}
        self.custom: dict[str, dict[str, str]] = {}
        self.capability_map: dict[str, list[str]] = {}
        self.faults = Faults()
        self.writes = 0
        self.token = VaultToken(ttl=0, policies=("root",))
        self.token_expired = False

    def _authorised(self, op: str) -> None:
        self.faults.hit(op)
        if self.token_expired:
            raise ForbiddenError("vault", op, "not allowed", status=403)

    @property
    def address(self) -> str:
        return "http://127.0.0.1:8200"

    def health(self) -> None:
        self.faults.hit("health")

    def read_metadata(self, path: str) -> KvMetadata:
        self._authorised("read_metadata")
        if path not in self.versions:
            raise NotFoundError("vault", f"metadata {path}", "not found", status=404)
        vs = self.versions[path]
        return KvMetadata(path, len(vs), 1, {
            i + 1: KvVersion(i + 1, "2026-01-01T00:00:00Z", "", False) for i in range(len(vs))
        }, dict(self.custom.get(path, {})))

    def read(self, path: str, version: int | None = None) -> dict[str, Secret]:
        self._authorised("read")
        vs = self.versions.get(path)
        if not vs:
            raise NotFoundError("vault", f"read {path}", "not found", status=404)
        v = version or len(vs)
        if v < 1 or v > len(vs):
            raise NotFoundError("vault", f"read {path} v{v}", "not found", status=404)
        return {k: Secret(x) for k, x in vs[v - 1].items()}

    def write(self, path: str, data: Mapping[str, Secret], *, cas: int) -> int:
        self._authorised("write")
        vs = self.versions.setdefault(path, [])
        if cas != len(vs):
            raise ConflictError("vault", f"write {path}", "check-and-set mismatch")
        vs.append({k: v.reveal() for k, v in data.items()})
        self.writes += 1
        return len(vs)

    def set_custom_metadata(self, path: str, metadata: Mapping[str, str]) -> None:
        self._authorised("set_custom_metadata")
        self.versions.setdefault(path, [])
        self.custom.setdefault(path, {}).update(metadata)

    def capabilities(self, paths: Sequence[str]) -> dict[str, list[str]]:
        self._authorised("capabilities")
        return {p: list(self.capability_map.get(p, ["read", "update", "create"])) for p in paths}

    def lookup_self(self) -> VaultToken:
        self._authorised("lookup_self")
        return self.token

    # test helpers
    def current(self, path: str, key: str) -> str:
        return self.versions[path][-1][key]
