"""The lab's ESO reads ``refreshInterval`` as ESO does (Go's ``time.ParseDuration``), not
with the product's parser: cases from Go's own table, and the ones where the two differ."""

from __future__ import annotations

import pytest
from rotate_lab.cluster.controllers.eso import refresh_interval
from rotate_lab.cluster.controllers.eso_duration import DurationError, parse_go_duration

from rotate.core.durations import parse_duration

S = 1_000_000_000
MS = 1_000_000
US = 1_000
MIN = 60 * S
H = 60 * MIN


@pytest.mark.parametrize(("text", "ns"), [
    ("0", 0), ("-0", 0), ("+0", 0),
    ("5s", 5 * S), ("30s", 30 * S), ("-5s", -5 * S), ("+5s", 5 * S),
    ("5.0s", 5 * S), ("5.6s", 5 * S + 600 * MS), ("5.s", 5 * S), (".5s", 500 * MS),
    ("1.004s", S + 4 * MS), ("100.00100s", 100 * S + MS),
    ("10ns", 10), ("11us", 11 * US), ("12µs", 12 * US), ("12μs", 12 * US), ("13ms", 13 * MS),
    ("15m", 15 * MIN), ("16h", 16 * H), ("3h30m", 3 * H + 30 * MIN), ("1h30m", 90 * MIN),
    ("1.5h", 90 * MIN), ("500ms", 500 * MS), ("10s", 10 * S),
    ("10.5s4m", 4 * MIN + 10 * S + 500 * MS), ("1m1m", 2 * MIN),
    ("-2m3.4s", -(2 * MIN + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", H + 2 * MIN + 3 * S + 4 * MS + 5 * US + 6),
    ("39h9m14.425s", 39 * H + 9 * MIN + 14 * S + 425 * MS),
    ("0.3333333333333333333h", 20 * MIN),
    ("9223372036854775807ns", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.830103483285477580700h", 49 * MIN + 48 * S + 372539827),
])
def test_go_durations_parse_as_go_parses_them(text: str, ns: int) -> None:
    assert parse_go_duration(text) == ns


@pytest.mark.parametrize(("text", "message"), [
    ("", "invalid duration"), ("3", "missing unit"), ("-", "invalid duration"),
    ("s", "invalid duration"), (".", "invalid duration"), ("-.", "invalid duration"),
    (".s", "invalid duration"), ("+.s", "invalid duration"), ("1d", "unknown unit 'd'"),
    ("1h 30m", "unknown unit 'h '"), (" 5s", "invalid duration"), ("5S", "unknown unit"),
    ("9223372036854775808ns", "invalid duration"),
    ("9223372036854775.808us", "invalid duration"),
    ("9223372036854ms775us808ns", "invalid duration"),
    ("-9223372036854775809ns", "invalid duration"),
])
def test_what_go_refuses_is_refused(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=message):
        parse_go_duration(text)


@pytest.mark.parametrize(("text", "go_seconds", "rotate_seconds"), [
    ("3", None, 3.0),          # a bare number: rotate reads seconds, Go wants a unit
    (" 5s", None, 5.0),        # rotate strips blanks, Go does not
    ("-5s", -5.0, None),       # a sign: Go only
    ("10us", 1e-05, None),     # micro- and nanoseconds: Go only
    (".5s", 0.5, None),        # no digit before the point: Go only
    ("5.s", 5.0, None),        # no digit after it: Go only
])
def test_where_eso_and_rotate_read_a_duration_differently(
        text: str, go_seconds: float | None, rotate_seconds: float | None) -> None:
    if go_seconds is None:
        with pytest.raises(DurationError):
            parse_go_duration(text)
    else:
        assert parse_go_duration(text) / 1e9 == pytest.approx(go_seconds)
    if rotate_seconds is None:
        with pytest.raises(ValueError):
            parse_duration(text)
    else:
        assert parse_duration(text) == rotate_seconds


@pytest.mark.parametrize(("raw", "seconds"), [
    ("1h30m", 5400.0), ("0", 0.0), ("0s", 0.0), ("500ms", 0.5),
    (None, 3600.0), ("", 3600.0),           # absent: ESO's default, 1h
    ("90", 3600.0), ("1d", 3600.0),         # not a Go duration: the default
    (0, 3600.0), (30, 3600.0),              # a number is not a metav1.Duration
])
def test_the_controller_refreshes_at_the_interval_eso_would_read(
        raw: object, seconds: float) -> None:
    es = {"spec": {} if raw is None else {"refreshInterval": raw}}
    assert refresh_interval(es) == seconds
