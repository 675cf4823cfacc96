"""A credential's cron ``schedule`` (docs/chain-file.md): the one module that parses cron.

Everything else sees a :class:`Schedule` and its two questions — the latest fire time at or
before a moment, the first one after a moment — so the cron library (croniter) stays behind
this seam and could be swapped without touching the engine.

The expression is the five fields of crontab(5) — minute, hour, day of month, month, day of
week — or one of the macros Kubernetes CronJobs take (``@hourly``, ``@daily``…), always in
UTC: a chain file is read on laptops and in pods in different time zones, and a schedule
must fire at the same instant for all of them.  croniter's extensions beyond crontab(5) —
a sixth (seconds) field, ``H`` hashed and ``R`` random values — are refused: a CronJob would
not accept them, and a random fire time cannot be reasoned about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

#: the macros a Kubernetes CronJob accepts, and the five fields each one stands for
MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EXTENSION = re.compile(r"(^|[^A-Za-z])[HR]([^A-Za-z]|$)")


@dataclass(frozen=True)
class Schedule:
    """A validated cron expression (build it with :func:`parse_schedule`); times are UTC."""

    expression: str  # as written in the chain file
    fields: str  # the five fields (a macro expanded)

    def last_fire(self, at: datetime) -> datetime:
        """The latest fire time at or before ``at``."""
        from croniter import croniter

        moment = _utc(at)
        if croniter.match(self.fields, moment.replace(second=0, microsecond=0)):
            return moment.replace(second=0, microsecond=0)
        return _utc(croniter(self.fields, moment).get_prev(datetime))

    def next_fire(self, after: datetime) -> datetime:
        """The first fire time strictly after ``after``."""
        from croniter import croniter

        return _utc(croniter(self.fields, _utc(after)).get_next(datetime))


def schedule_problem(expression: object) -> str | None:
    """Why ``expression`` is no schedule (a sentence for the chain file's problem list), or
    None when it is one."""
    if not isinstance(expression, str) or not expression.strip():
        return "schedule must be a cron expression such as \"0 3 * * *\" (five fields, UTC)"
    text = expression.strip()
    if text.startswith("@"):
        if text not in MACROS:
            return (f"schedule {text!r} is no cron macro: use one of {', '.join(MACROS)} "
                    "or five fields")
        return None
    fields = text.split()
    if len(fields) != 5:
        return (f"schedule {text!r} has {len(fields)} fields, 5 expected: minute hour "
                "day-of-month month day-of-week (UTC), e.g. \"0 3 * * *\"")
    if _EXTENSION.search(text):
        return f"schedule {text!r}: H and R (hashed, random) are not cron fields"
    from croniter import croniter

    if not croniter.is_valid(text):
        return (f"schedule {text!r} is no valid cron expression: minute hour day-of-month "
                "month day-of-week (UTC), e.g. \"0 3 * * *\"")
    try:  # valid syntax that never fires ("0 0 30 2 *") fails here
        croniter(text, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except Exception:  # croniter raises several kinds; none is printed
        return f"schedule {text!r} never fires"
    return None


def parse_schedule(expression: str) -> Schedule:
    """The :class:`Schedule` of ``expression``; ValueError (with the problem) if it is none."""
    problem = schedule_problem(expression)
    if problem is not None:
        raise ValueError(problem)
    text = expression.strip()
    return Schedule(text, MACROS.get(text, text))


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
