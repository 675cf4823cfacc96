"""A stub of what provider access asks of the KubeClient (``get``, ``read_secret_key`` and
``port_forward``), over a fixed table of objects and Secret keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rotate.clients.seams import Endpoint
from rotate.core.errors import NotFoundError
from rotate.core.secret import Secret


class StubKube:
    def __init__(self, objects: Mapping[tuple[str, str, str], dict[str, Any]],
                 secrets: Mapping[tuple[str, str, str], str] | None = None) -> None:
        self.objects, self.secrets = objects, secrets or {}
        self.forwards: list[tuple[str, str, int]] = []  # port_forward calls, in order

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        try:
            return self.objects[(kind, namespace or "", name)]
        except KeyError:
            raise NotFoundError("kubernetes", f"{kind} {namespace}/{name}", "not found") from None

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None:
        value = self.secrets.get((namespace, name, key))
        return Secret(value) if value is not None else None

    def port_forward(self, namespace: str, pod: str, port: int) -> Endpoint:
        """A loopback endpoint per call, as the real listener hands out."""
        self.forwards.append((namespace, pod, port))
        return Endpoint("127.0.0.1", 40000 + len(self.forwards))
