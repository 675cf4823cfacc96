"""When a CronJob is due: the schedule arithmetic of kube-controller-manager's cronjob
controller (v2, ``pkg/controller/cronjob/utils.go``), as pure functions of a clock reading.
The API server's validation and the lab's CronJob controller both read schedules with it.

- ``spec.schedule`` is a standard five-field cron expression or a ``@hourly``-style
  descriptor, read by ``croniter`` with cron's day rule (day-of-month OR day-of-week when
  both are restricted, as robfig/cron's ``ParseStandard``); ``TZ=``/``CRON_TZ=`` prefixes
  are refused (upstream validation since 1.25: use ``spec.timeZone``).
- ``spec.timeZone`` is an IANA name; without one the schedule is read in UTC (upstream: the
  controller manager's local zone, UTC in most clusters).
- :func:`most_recent` is upstream's ``mostRecentScheduleTime``: the earliest time considered
  is ``status.lastScheduleTime``, else the object's ``creationTimestamp``, raised to
  ``now - startingDeadlineSeconds`` when asked; it returns the latest schedule time in
  ``(earliest, now]`` (only that one is ever started, however many were missed) and
  whether more than 100 were missed.

Times are POSIX seconds; nothing here reads the clock, so tests can pass any ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

Obj = dict[str, Any]

#: upstream's threshold for the ``TooManyMissedTimes`` warning
MANY_MISSED = 100
#: upstream re-queues a CronJob 100 ms after its next schedule time
NEXT_SCHEDULE_DELTA = 0.1


class ScheduleError(ValueError):
    """A schedule or time zone the controller cannot use; ``reason`` is the event's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Schedule:
    expr: str
    zone: tzinfo

    def next_after(self, t: float) -> float:
        """The first schedule time strictly after ``t``."""
        return self._walk(croniter(self.expr, datetime.fromtimestamp(int(t), self.zone)), 1)

    def latest_at_or_before(self, t: float) -> float:
        return self._walk(croniter(self.expr, datetime.fromtimestamp(int(t) + 1, self.zone)),
                          -1)

    def _walk(self, it: croniter, step: int) -> float:
        """The next (``step`` 1) or previous (-1) time whose wall-clock time the expression
        matches.  croniter moves a time that a spring-forward transition skips to just after
        the transition; robfig/cron, and so Kubernetes, never runs it: skip such times."""
        # the stubs type the fields as strings; croniter gives ints, or ["*"] for any
        fields: list[list[int | str]] = [list(f) for f in croniter(self.expr).expanded[:2]]
        minutes, hours = fields
        for _ in range(48):
            at: datetime = it.get_next(datetime) if step > 0 else it.get_prev(datetime)
            if (minutes == ["*"] or at.minute in minutes) and (hours == ["*"]
                                                                or at.hour in hours):
                return float(at.timestamp())
        raise ScheduleError("UnparseableSchedule", f"no time matches {self.expr!r}")

    def stamp(self, t: float) -> str:
        """``t`` in the schedule's zone, as Go's RFC 3339 (``Z`` for UTC)."""
        text = datetime.fromtimestamp(int(t), self.zone).isoformat()
        return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def zone_of(name: str | None) -> tzinfo:
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError("UnknownTimeZone", f"invalid timeZone: {name!r}") from exc


def parse(expr: str, time_zone: str | None) -> Schedule:
    """A usable schedule, or :class:`ScheduleError` with upstream's event reason."""
    text = " ".join(str(expr).split())
    if "TZ=" in text:
        raise ScheduleError("UnsupportedSchedule",
                            "CRON_TZ or TZ used in schedule is not supported, "
                            "use the spec.timeZone field instead")
    zone = zone_of(time_zone)
    fields = text.split(" ")
    if not text or (not text.startswith("@") and len(fields) != 5) or not croniter.is_valid(text):
        raise ScheduleError("UnparseableSchedule", f"unparseable schedule: {expr!r}")
    return Schedule(text, zone)


def of(cronjob: Obj) -> Schedule:
    spec = cronjob.get("spec") or {}
    return parse(str(spec.get("schedule") or ""), spec.get("timeZone"))


@dataclass(frozen=True)
class Due:
    earliest: float
    most_recent: float | None
    many_missed: bool


def most_recent(schedule: Schedule, *, created: float, last_scheduled: float | None,
                now: float, deadline_seconds: int | None) -> Due:
    """Upstream's ``mostRecentScheduleTime`` (with ``startingDeadlineSeconds`` when given)."""
    earliest = last_scheduled if last_scheduled is not None else created
    if deadline_seconds is not None:
        earliest = max(earliest, now - deadline_seconds)
    t1 = schedule.next_after(earliest)
    if now < t1:
        return Due(earliest, None, False)
    t2 = schedule.next_after(t1)
    if now < t2:
        return Due(earliest, t1, False)
    between = max(1.0, round(t2 - t1))
    missed = int((now - t1) // between) + 1
    return Due(earliest, schedule.latest_at_or_before(now), missed > MANY_MISSED)


def wake_after(schedule: Schedule, *, created: float, last_scheduled: float | None,
               now: float) -> float:
    """Seconds until the reconcile after the next schedule time (upstream's
    ``nextScheduleTimeDuration``: computed without the starting deadline)."""
    due = most_recent(schedule, created=created, last_scheduled=last_scheduled, now=now,
                      deadline_seconds=None)
    base = due.most_recent if due.most_recent is not None else due.earliest
    return max(0.0, schedule.next_after(base) + NEXT_SCHEDULE_DELTA - now)


def job_name(cronjob_name: str, scheduled: float) -> str:
    """``<cronjob>-<scheduled time in minutes since the epoch>``: the name is the lock that
    keeps a schedule time from starting two Jobs (upstream's ``getJobName``)."""
    return f"{cronjob_name}-{int(scheduled) // 60}"
