"""Findings that checks produce: a preflight/doctor :class:`Check` and a field :class:`Trap`.

They live in ``core`` (not ``engine``) because stages detect traps and the engine reports
them: both layers need the type, and imports flow only downwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """One preflight (or doctor) check."""

    check: str  # short id, e.g. "vault.capabilities", "trap.paused-deployment"
    ok: bool
    detail: str
    fatal: bool = True  # a failed non-fatal check is a warning shown in the plan

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "detail": self.detail, "fatal": self.fatal}


@dataclass(frozen=True)
class Trap:
    """A field hazard preflight found, and what rotate will do about it."""

    name: str  # "paused-deployment", "refresh-created-once", "statefulset-ondelete", ...
    target: str
    problem: str
    action: str  # what rotate does: "refuse" / "delete pods in order" / "wait for Reloader"
    blocking: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "problem": self.problem,
                "action": self.action, "blocking": self.blocking}
