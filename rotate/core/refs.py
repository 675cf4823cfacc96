"""Names of things in the cluster, as frozen values."""

from __future__ import annotations

from dataclasses import dataclass

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


@dataclass(frozen=True, order=True)
class ObjectRef:
    kind: str  # "Deployment", "Secret", "ExternalSecret", "Lease", ...
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.namespace}/{self.name}"

    @property
    def short(self) -> str:
        return f"{self.namespace}/{self.name}"
