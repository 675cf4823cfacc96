"""Durations as operators write them: ``90s``, ``5m``, ``1h30m``, ``500ms``, or bare seconds."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``text``. Raises ValueError with a message naming the bad input."""
    if isinstance(text, int | float):
        if text < 0:
            raise ValueError(f"negative duration: {text}")
        return float(text)
    s = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return float(s)
    pos, total = 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 5m, 1h30m)")
    return total


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(round(seconds), 60)
    return f"{m}m{s:02d}s"
