"""RFC 3339 timestamps as Kubernetes writes and reads them.

Kubernetes ``Time`` has second precision (``2026-12-02T14:13:24Z``) and ``MicroTime``
microseconds; the journal and restart stamps use microseconds so that two actions in one
second stay distinct (a restart patch equal to the previous one would be an empty patch
and roll nothing).
"""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def rfc3339(dt: datetime, *, micro: bool = True) -> str:
    dt = dt.astimezone(UTC)
    if micro:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    """Accepts ``Z`` or an offset, with or without fractional seconds."""
    value = text.strip()
    if value.endswith("Z") or value.endswith("z"):
        value = value[:-1] + "+00:00"
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def truncate_to_second(dt: datetime) -> datetime:
    return dt.replace(microsecond=0)
