"""One credential of a run of several credentials, as its ``run.start`` record names it.

A run of several credentials (``rotate dragonfly postgres``, rotate.engine.merge) journals
one ``run.start`` whose ``credential`` joins the names with "+" and whose ``members`` list,
per credential, what a run of that credential alone would have journaled at its top level:
its backend path and version, its consumers and providers, and a rollback's restore.  A
journal without ``members`` is a one-credential run, read as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rotate.core.strategy import Strategy

#: what joins the credentials' names in a run's ``credential`` and its run id
JOIN = "+"


@dataclass(frozen=True)
class Member:
    """One credential of a run of several (``run.start``'s ``members``): what a run of it
    alone would journal in its own ``run.start`` (rotate.engine.merge)."""

    credential: str
    backend_path: str
    current_version: int | None
    consumers: tuple[str, ...]
    providers: tuple[str, ...]
    restore_backend_version: int | None = None  # a rollback's
    restore_config: Mapping[str, int] = field(default_factory=dict)
    restore_config_match: Mapping[str, int] = field(default_factory=dict)
    #: its own strategy: the credentials of one run may differ (rotate.engine.merge)
    strategy: Strategy = Strategy.restart

    def to_json(self) -> dict[str, Any]:
        return {"credential": self.credential, "backend_path": self.backend_path,
                "current_version": self.current_version, "consumers": list(self.consumers),
                "providers": list(self.providers),
                "restore_backend_version": self.restore_backend_version,
                "restore_config": dict(self.restore_config),
                "restore_config_match": dict(self.restore_config_match),
                "strategy": str(self.strategy)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Member:
        current, restore = data.get("current_version"), data.get("restore_backend_version")
        strategy = str(data.get("strategy") or "restart")
        return cls(str(data["credential"]), str(data.get("backend_path", "")),
                   int(current) if current is not None else None,
                   tuple(str(c) for c in data.get("consumers", [])),
                   tuple(str(p) for p in data.get("providers", [])),
                   int(restore) if restore is not None else None,
                   {str(k): int(v) for k, v in (data.get("restore_config") or {}).items()},
                   {str(k): int(v) for k, v in
                    (data.get("restore_config_match") or {}).items()},
                   Strategy(strategy) if strategy in set(Strategy) else Strategy.restart)
