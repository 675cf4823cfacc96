"""A stub of the two KubeClient reads provider access makes (``get`` and
``read_secret_key``), over a fixed table of objects and Secret keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rotate.core.errors import NotFoundError
from rotate.core.secret import Secret


class StubKube:
    def __init__(self, objects: Mapping[tuple[str, str, str], dict[str, Any]],
                 secrets: Mapping[tuple[str, str, str], str] | None = None) -> None:
        self.objects, self.secrets = objects, secrets or {}

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        try:
            return self.objects[(kind, namespace or "", name)]
        except KeyError:
            raise NotFoundError("kubernetes", f"{kind} {namespace}/{name}", "not found") from None

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None:
        value = self.secrets.get((namespace, name, key))
        return Secret(value) if value is not None else None
