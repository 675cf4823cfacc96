"""``refreshInterval`` as ESO reads it: Go's ``time.ParseDuration``, written out here.

ESO's ``spec.refreshInterval`` is a ``metav1.Duration``, decoded with Go's
``time.ParseDuration``; the lab's ESO parses it the same way, on its own, so that a value
the product (``rotate``) reads differently from ESO shows up as a difference in the lab
instead of being agreed on by construction.

The grammar: ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`` with units ``ns``, ``us`` (also ``µs``,
``μs``), ``ms``, ``s``, ``m``, ``h``; ``"0"`` alone needs no unit; every other number needs
one (``"10"`` is invalid); each number has a digit before or after its point (``".5s"``,
``"1.s"``); no spaces; units in any order, repeated ones add up (``"1m1m"`` is 2 minutes).
The value is a signed 64-bit count of nanoseconds: a larger one is invalid, and a fraction
finer than a nanosecond is truncated, as Go does.
"""

from __future__ import annotations

_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000,
       "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
_MAX = 1 << 63  # |duration| in ns: Go's int64 (the positive side one less)
_DIGITS = frozenset("0123456789")
_NUMERIC = _DIGITS | {"."}


class DurationError(ValueError):
    """Not a Go duration; the message has Go's wording (``time: invalid duration "x"``)."""


def parse_go_duration(text: str) -> int:
    """Nanoseconds in ``text``, as Go's ``time.ParseDuration`` returns them."""
    orig, s = text, text
    invalid = DurationError(f"time: invalid duration {orig!r}")
    neg = False
    if s[:1] in ("-", "+"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if s[0] not in _NUMERIC:
            raise invalid
        whole, s, pre = _leading_int(s, invalid)
        frac, scale, post = 0, 1.0, False
        if s[:1] == ".":
            frac, scale, s, post = _leading_fraction(s[1:])
        if not pre and not post:
            raise invalid
        i = 0
        while i < len(s) and s[i] not in _NUMERIC:
            i += 1
        if i == 0:
            raise DurationError(f"time: missing unit in duration {orig!r}")
        unit_name, s = s[:i], s[i:]
        unit = _NS.get(unit_name)
        if unit is None:
            raise DurationError(f"time: unknown unit {unit_name!r} in duration {orig!r}")
        if whole > _MAX // unit:
            raise invalid
        value = whole * unit
        if frac > 0:
            value += int(float(frac) * (float(unit) / scale))
            if value > _MAX:
                raise invalid
        total += value
        if total > _MAX:
            raise invalid
    if neg:
        return -total
    if total > _MAX - 1:
        raise invalid
    return total


def _leading_int(s: str, invalid: DurationError) -> tuple[int, str, bool]:
    """The digits at the start of ``s`` as a number, the rest, and whether there were any."""
    i, x = 0, 0
    while i < len(s) and s[i] in _DIGITS:
        if x > _MAX // 10:
            raise invalid
        x = x * 10 + int(s[i])
        if x > _MAX:
            raise invalid
        i += 1
    return x, s[i:], i > 0


def _leading_fraction(s: str) -> tuple[int, float, str, bool]:
    """The digits after a point: their value, 10**(digits kept), the rest, any digits.

    Digits past what fits in 63 bits are consumed and ignored, as Go does."""
    i, x, scale, overflow = 0, 0, 1.0, False
    while i < len(s) and s[i] in _DIGITS:
        if not overflow:
            if x > (_MAX - 1) // 10:
                overflow = True
            else:
                y = x * 10 + int(s[i])
                if y > _MAX:
                    overflow = True
                else:
                    x, scale = y, scale * 10
        i += 1
    return x, scale, s[i:], i > 0


def refresh_seconds(value: object) -> float:
    """A ``refreshInterval`` in seconds.  Only a string is a ``metav1.Duration`` in JSON (a
    number would not decode); anything else raises :class:`DurationError`."""
    if not isinstance(value, str):
        raise DurationError(f"time: invalid duration {value!r} (not a string)")
    return parse_go_duration(value) / 1e9
