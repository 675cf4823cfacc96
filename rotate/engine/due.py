"""``rotate due``: which credentials are due for a rotation now, why, and when next.

The API other processes call (``rotate due --confirm``, ``rotate watch``)::

    due_credentials(chain, credentials, vault, runs, now) -> tuple[Due, ...]

One :class:`Due` per credential, in the order given.  Read-only: one metadata read of the
backend per credential (never a value) and the run journals; nothing is written, no lock is
taken.  :meth:`rotate.engine.api.Engine.due` wraps it with the chain file, the adapters and
the journals of the state directory and the cluster.

When a credential is due (:func:`decide`, pure — a fixed ``now`` in, a verdict out):

- **maxAge** (the credential's, else ``notify.maxAge``, as ``rotate status``'s ``value.age``):
  the backend's current version was created ``maxAge`` or longer ago.  Its
  ``created_time`` is the value's age — the same source ``rotate status`` reads;
- **schedule** (cron, UTC; rotate.chain.schedule): the schedule fired after the last time
  the chain was carried through — the later of the current version's creation and the end
  of the credential's last successful rotation (an ``--adopt`` run included), so a fire
  time already handled is never handled twice, and one missed while nothing ran (the
  CronJob was suspended, the watcher down) is still due;
- neither set: never due ("no schedule"), which is no error.

:attr:`Due.next_due` is the first moment the credential is (or was) due: the earlier of
``created + maxAge`` and the schedule's first fire after the last carry; due ⇔
``next_due <= now``.  A backend path never written is due at once when a schedule or
maxAge is set (there is no value to keep).  A backend that cannot be read gives a
:class:`Due` with ``error`` set and ``due`` False: the caller decides (the CLI exits 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from rotate.chain.model import Chain, Credential
from rotate.core.errors import ClientError, NotFoundError
from rotate.core.timestamps import parse_rfc3339, rfc3339
from rotate.engine.status_model import age_words
from rotate.engine.targets import backend_target

if TYPE_CHECKING:
    from rotate.chain.schedule import Schedule
    from rotate.clients.seams import Vault
    from rotate.engine.unfinished import RunSource

Trigger = Literal["maxAge", "schedule"]
#: the operations whose success carries the chain (a rollback restores an older value)
CARRYING = ("rotate",)


@dataclass(frozen=True)
class Due:
    """Whether one credential is due now, why, and when it is (was) due."""

    credential: str
    due: bool
    #: what makes it due now, in this order: "maxAge", "schedule" (empty: not due)
    triggers: tuple[Trigger, ...]
    #: one line for a person: why it is due, or what it waits for
    reason: str
    #: the first moment it is (or was) due; None: never (no schedule) or unknown (error)
    next_due: datetime | None
    backend: str  # "secret/infra/dragonfly#password"
    version: int | None  # the backend's current version (None: never written, or unread)
    written_at: datetime | None  # when that version was created
    last_run: datetime | None  # when its last successful rotation ended
    age_seconds: float | None
    max_age_seconds: float | None
    schedule: str | None  # as written in the chain file
    #: the backend could not be read: neither due nor not ("" otherwise)
    error: str = ""
    #: its value comes from stdin (``valueFrom: stdin``): due or not, ``rotate due --confirm``
    #: cannot rotate it unattended; a person runs ``rotate NAME --confirm --value-stdin``
    manual: bool = False

    @property
    def scheduled(self) -> bool:
        """Whether anything can make it due (a maxAge or a schedule)."""
        return self.max_age_seconds is not None or self.schedule is not None

    def to_json(self) -> dict[str, Any]:
        def when(moment: datetime | None) -> str | None:
            return rfc3339(moment, micro=False) if moment is not None else None

        return {
            "credential": self.credential, "due": self.due, "triggers": list(self.triggers),
            "reason": self.reason, "next_due": when(self.next_due),
            "backend": {"path": self.backend, "version": self.version,
                        "written_at": when(self.written_at)},
            "last_run": when(self.last_run), "age_seconds": self.age_seconds,
            "max_age_seconds": self.max_age_seconds, "schedule": self.schedule,
            "error": self.error or None, "manual": self.manual,
        }


@dataclass(frozen=True)
class Written:
    """What the backend's metadata says of the current version."""

    version: int | None  # None: the path was never written
    created: datetime | None


def decide(cred: Credential, chain: Chain, written: Written, last_run: datetime | None,
           now: datetime) -> Due:
    """The verdict for ``cred`` at ``now`` (pure: no I/O, no clock of its own)."""
    limit = cred.max_age if cred.max_age is not None else chain.notify.max_age
    schedule = cred.schedule
    created = written.created
    age = max(0.0, (now - created).total_seconds()) if created is not None else None
    base = Due(cred.name, False, (), "", None, backend_target(chain, cred), written.version,
               created, last_run, age, limit,
               schedule.expression if schedule is not None else None,
               manual=cred.value_from == "stdin")
    if limit is None and schedule is None:
        return replace(base, reason="no schedule (neither maxAge nor schedule)")
    if created is None:
        return replace(base, due=True, triggers=_set(limit, schedule), next_due=now,
                       reason="the backend holds no value yet")
    carried = max(created, last_run) if last_run is not None else created
    at: dict[Trigger, datetime] = {}
    if limit is not None:
        at["maxAge"] = created + timedelta(seconds=limit)
    if schedule is not None:
        at["schedule"] = schedule.next_fire(carried)
    triggers = tuple(t for t in ("maxAge", "schedule") if t in at and at[t] <= now)
    return replace(base, due=bool(triggers), triggers=triggers,
                   reason=_words(age or 0.0, limit, schedule, now, triggers),
                   next_due=min(at.values()))


def _set(limit: float | None, schedule: Schedule | None) -> tuple[Trigger, ...]:
    out: list[Trigger] = []
    if limit is not None:
        out.append("maxAge")
    if schedule is not None:
        out.append("schedule")
    return tuple(out)


def _words(age: float, limit: float | None, schedule: Schedule | None, now: datetime,
           triggers: Sequence[Trigger]) -> str:
    parts = []
    if limit is not None:
        sign = "≥" if "maxAge" in triggers else "<"
        parts.append(f"value {age_words(age)} old {sign} maxAge {age_words(limit)}")
    if schedule is not None:
        if "schedule" in triggers:
            fired = schedule.last_fire(now)
            parts.append(f"schedule {schedule.expression!r} fired "
                         f"{rfc3339(fired, micro=False)}, after the last rotation")
        else:
            parts.append(f"schedule {schedule.expression!r}")
    return "; ".join(parts)


def backend_written(vault: Vault, cred: Credential) -> Written:
    """The backend's current version and its creation time (metadata only: no value is
    read).  ClientError when it cannot be read; a path never written is ``Written(None,
    None)``."""
    try:
        meta = vault.read_metadata(cred.backend.path)
    except NotFoundError:
        return Written(None, None)
    version = meta.current_version
    info = meta.versions.get(version)
    if version < 1 or info is None:
        return Written(None, None)
    try:
        return Written(version, parse_rfc3339(info.created_time))
    except ValueError:
        return Written(version, None)


def last_successes(runs: RunSource) -> dict[str, datetime]:
    """Credential → the end of its latest successful rotation (a run of several counts for
    each of its credentials), over every readable journal."""
    out: dict[str, datetime] = {}
    for state in runs.load_runs():
        if (state.status != "succeeded" or state.operation not in CARRYING
                or not state.finished_at):
            continue
        try:
            ended = parse_rfc3339(state.finished_at)
        except ValueError:
            continue
        for name in state.start.credentials:
            if name not in out or ended > out[name]:
                out[name] = ended
    return out


def due_credentials(chain: Chain, credentials: Iterable[Credential], vault: Vault,
                    runs: RunSource, now: datetime) -> tuple[Due, ...]:
    """Each of ``credentials`` (in that order) due or not at ``now``, and why.

    Reads the backend's metadata of each credential that has a maxAge or a schedule (one
    GET each, no value) and every run journal ``runs`` holds (once).  A backend that cannot
    be read is that credential's :attr:`Due.error`; the others are still decided."""
    creds = list(credentials)
    timed = [c for c in creds if c.max_age is not None or c.schedule is not None
             or chain.notify.max_age is not None]
    ended = last_successes(runs) if any(c.schedule is not None for c in timed) else {}
    out = []
    for cred in creds:
        if cred not in timed:
            out.append(decide(cred, chain, Written(None, None), None, now))
            continue
        try:
            written = backend_written(vault, cred)
        except ClientError as exc:
            out.append(Due(
                cred.name, False, (), f"the backend cannot be read: {exc.message}", None,
                backend_target(chain, cred), None, None, ended.get(cred.name), None,
                cred.max_age if cred.max_age is not None else chain.notify.max_age,
                cred.schedule.expression if cred.schedule is not None else None,
                error=f"cannot read {backend_target(chain, cred)}: {exc.message}",
                manual=cred.value_from == "stdin"))
            continue
        out.append(decide(cred, chain, written, ended.get(cred.name), now))
    return tuple(out)
