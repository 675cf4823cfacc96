"""The Config Center of a chain file without ``configCenter``: every consumer of its
credentials reads its Secret itself, so no step ever asks it anything.  Should one do so
anyway (a chain edited under a resumed run), the request fails as a clear, permanent error
naming what is missing — never a connection to a guessed URL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from rotate.clients.seams import MintedToken, TokenInfo, VersionedDoc
from rotate.core.errors import NotFoundError


class AbsentConfigCenter:
    """A :class:`rotate.clients.seams.ConfigCenter` that has no server."""

    url = "(no configCenter in the chain file)"

    @staticmethod
    def _none(operation: str) -> NoReturn:
        raise NotFoundError("config center", operation, "the chain file has no configCenter "
                            "section: add one for services that read a Config Center")

    def health(self) -> None:
        self._none("health")

    def services(self) -> list[str]:
        self._none("list services")

    def get_schema(self, service: str) -> dict[str, Any]:
        self._none(f"schema of {service}")

    def get_version_number(self, service: str, key: str) -> int | None:
        self._none(f"read {service}/{key}")

    def get_key(self, service: str, key: str) -> VersionedDoc:
        self._none(f"read {service}/{key}")

    def get_version(self, service: str, key: str, version: int) -> VersionedDoc:
        self._none(f"read {service}/{key}")

    def put_key(self, service: str, key: str, value: Mapping[str, Any], *,
                if_match: int | None) -> int:
        self._none(f"write {service}/{key}")

    def restore_version(self, service: str, key: str, version: int, *, if_match: int) -> int:
        self._none(f"restore {service}/{key}")

    def mint_token(self, service: str, label: str | None = None) -> MintedToken:
        self._none(f"mint a token for {service}")

    def probe_write(self, service: str, key: str) -> None:
        self._none(f"probe {service}/{key}")

    def list_tokens(self, service: str) -> list[TokenInfo]:
        self._none(f"tokens of {service}")

    def revoke_token(self, service: str, token_id: str) -> None:
        self._none(f"revoke a token of {service}")
