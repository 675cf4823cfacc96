"""How preflight and doctor collect what they observe: a failed check is a finding, not an
exception.

Invariants: a check catches only :class:`ClientError` (translated, safe to print); anything
else propagates, as a bug.  A collector is filled by one thread; work fanned out to other
threads returns :class:`Fanned` values, merged back in input order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rotate.core.errors import ClientError
from rotate.core.refs import ObjectRef
from rotate.engine.model import Check, Trap
from rotate.stages import rollout


@dataclass
class Collector:
    """The checks and traps of one part of preflight, in the order they were found."""

    checks: list[Check] = field(default_factory=list)
    traps: list[Trap] = field(default_factory=list)

    def run(self, name: str, fn: Callable[[], str], *, fatal: bool = True) -> bool:
        """Run one check: ``fn`` returns the detail on success, raises ClientError otherwise."""
        try:
            detail = fn()
        except ClientError as exc:
            self.checks.append(Check(name, False, exc.message, fatal))
            return False
        self.checks.append(Check(name, True, detail, fatal))
        return True

    def add(self, name: str, ok: bool, detail: str, fatal: bool = True) -> None:
        self.checks.append(Check(name, ok, detail, fatal))

    def merge(self, results: Iterable[Fanned]) -> None:
        for fanned in results:
            self.checks.extend(fanned.checks)
            self.traps.extend(fanned.traps)


@dataclass(frozen=True)
class Fanned:
    """What one consumer's checks found, merged in chain order (see ``fan_out``)."""

    checks: list[Check]
    traps: list[Trap]
    facts: tuple[Any, Any] = (None, None)


def note_uid(uids: dict[ObjectRef, str], ref: ObjectRef, obj: Mapping[str, Any]) -> None:
    """Remember ``obj``'s uid: the run's events name it without reading it again.  One key
    per object, so threads of preflight may share ``uids``."""
    uid = rollout.metadata(obj).get("uid")
    if uid:
        uids[ref] = str(uid)
