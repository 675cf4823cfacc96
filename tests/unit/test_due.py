"""``rotate due``'s decision (rotate.engine.due) and the chain file's ``schedule``
(rotate.chain.schedule): a fixed clock, a real chain file, the fake backend; no sleep."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rotate.chain.loader import load_chain
from rotate.chain.model import Chain
from rotate.chain.schedule import parse_schedule, schedule_problem
from rotate.core.errors import ChainFileError, ForbiddenError
from rotate.engine.due import Due, Written, decide, due_credentials, last_successes
from tests.fakes.vault import FakeVault
from tests.support.chains import MINIMAL, write_chain

NOW = datetime(2026, 12, 5, 4, 40, tzinfo=UTC)


def _chain(tmp_path: Path, extra: str = "", notify: str = "") -> Chain:
    text = MINIMAL.replace(
        "    generate: {length: 40, alphabet: alnum}\n",
        "    generate: {length: 40, alphabet: alnum}\n" + extra, 1) + notify
    return load_chain(write_chain(tmp_path, text))


def _decide(chain: Chain, created: datetime | None, last_run: datetime | None = None,
            now: datetime = NOW) -> Due:
    return decide(chain.credential("dragonfly"), chain,
                  Written(4 if created else None, created), last_run, now)


# ----------------------------------------------------------------------------- schedule


@pytest.mark.parametrize(("expression", "words"), [
    ("*/5 * * * * *", "has 6 fields, 5 expected"),
    ("0 3 * *", "has 4 fields, 5 expected"),
    ("61 * * * *", "is no valid cron expression"),
    ("H 3 * * *", "H and R (hashed, random) are not cron fields"),
    ("0 0 30 2 *", "never fires"),
    ("@fortnightly", "is no cron macro"),
])
def test_a_bad_schedule_is_named_with_why(expression: str, words: str) -> None:
    problem = schedule_problem(expression)
    assert problem is not None and words in problem


def test_schedules_fire_in_utc_with_macros_as_kubernetes_takes_them() -> None:
    assert schedule_problem("0 3 * * MON-FRI") is None
    daily = parse_schedule("@daily")
    assert daily.fields == "0 0 * * *"
    three = parse_schedule("0 3 * * *")
    assert three.last_fire(NOW) == datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
    assert three.next_fire(NOW) == datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
    at_fire = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
    assert three.last_fire(at_fire) == at_fire  # a fire time counts at its own minute
    assert three.next_fire(at_fire) == datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def test_a_bad_schedule_in_the_chain_file_is_refused_with_file_and_line(tmp_path: Path
                                                                        ) -> None:
    with pytest.raises(ChainFileError) as caught:
        _chain(tmp_path, "    schedule: \"0 3 * *\"\n")
    assert caught.value.exit_code == 2
    text = caught.value.message
    assert "rotate.yaml:12: /credentials/dragonfly/schedule: schedule '0 3 * *' has 4 " \
           "fields" in text, text


def test_a_schedule_that_is_no_string_is_refused_by_the_schema(tmp_path: Path) -> None:
    with pytest.raises(ChainFileError) as caught:
        _chain(tmp_path, "    schedule: 5\n")
    assert "/credentials/dragonfly/schedule" in caught.value.message


# ----------------------------------------------------------------------------- maxAge


def test_max_age_due_when_the_current_version_is_that_old(tmp_path: Path) -> None:
    chain = _chain(tmp_path, "    maxAge: 1h\n")
    fresh = _decide(chain, NOW - timedelta(minutes=59))
    assert not fresh.due and fresh.triggers == ()
    assert fresh.next_due == NOW + timedelta(minutes=1)
    assert fresh.reason == "value 59m00s old < maxAge 1h00m"
    old = _decide(chain, NOW - timedelta(hours=1))  # ≥ maxAge: due at the very second
    assert old.due and old.triggers == ("maxAge",)
    assert old.next_due == NOW and old.age_seconds == 3600.0
    assert old.reason == "value 1h00m old ≥ maxAge 1h00m"


def test_notify_max_age_is_the_default_as_in_status(tmp_path: Path) -> None:
    chain = _chain(tmp_path, notify="notify: {maxAge: 30m}\n")
    found = _decide(chain, NOW - timedelta(hours=2))
    assert found.due and found.max_age_seconds == 1800.0


def test_neither_max_age_nor_schedule_is_never_due_and_no_error(tmp_path: Path) -> None:
    found = _decide(_chain(tmp_path), NOW - timedelta(days=900))
    assert not found.due and not found.scheduled and found.next_due is None
    assert found.reason == "no schedule (neither maxAge nor schedule)" and not found.error


def test_a_value_from_stdin_is_due_but_left_to_a_person(tmp_path: Path) -> None:
    chain = _chain(tmp_path, "    maxAge: 1h\n")
    cred = chain.credential("dragonfly")
    from dataclasses import replace

    chain = replace(chain, credentials={"dragonfly": replace(cred, generate=None,
                                                             value_from="stdin")})
    found = _decide(chain, NOW - timedelta(hours=2))
    assert found.due and found.manual and found.to_json()["manual"] is True


def test_a_path_never_written_is_due_at_once(tmp_path: Path) -> None:
    found = _decide(_chain(tmp_path, "    maxAge: 1h\n"), None)
    assert found.due and found.next_due == NOW and found.version is None


# ----------------------------------------------------------------------------- schedule


def test_schedule_due_when_it_fired_after_the_last_write(tmp_path: Path) -> None:
    chain = _chain(tmp_path, "    schedule: \"0 3 * * *\"\n")
    before = _decide(chain, datetime(2026, 12, 5, 2, 59, tzinfo=UTC))
    assert before.due and before.triggers == ("schedule",)
    assert before.next_due == datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
    assert "fired 2026-12-05T03:00:00Z, after the last rotation" in before.reason
    after = _decide(chain, datetime(2026, 12, 5, 3, 1, tzinfo=UTC))
    assert not after.due and after.next_due == datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def test_a_missed_fire_stays_due_until_a_rotation(tmp_path: Path) -> None:
    """The CronJob suspended for three days: one rotation is due, not three."""
    chain = _chain(tmp_path, "    schedule: \"0 3 * * *\"\n")
    found = _decide(chain, NOW - timedelta(days=4))
    assert found.due and found.next_due == datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def test_a_successful_run_after_the_fire_counts_though_it_wrote_no_version(tmp_path: Path
                                                                         ) -> None:
    """An --adopt run carries the value without a new version: the fire is handled."""
    chain = _chain(tmp_path, "    schedule: \"0 3 * * *\"\n")
    found = _decide(chain, NOW - timedelta(days=2),
                    last_run=datetime(2026, 12, 5, 3, 5, tzinfo=UTC))
    assert not found.due and found.next_due == datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def test_both_set_the_earlier_decides_and_both_are_named(tmp_path: Path) -> None:
    chain = _chain(tmp_path, "    maxAge: 1h\n    schedule: \"0 3 * * *\"\n")
    found = _decide(chain, NOW - timedelta(hours=3))
    assert found.triggers == ("maxAge", "schedule")
    assert found.next_due == NOW - timedelta(hours=2)  # created + maxAge, before 03:00
    assert found.reason.startswith("value 3h00m old ≥ maxAge 1h00m; schedule '0 3 * * *'")
    fresh = _decide(chain, NOW - timedelta(minutes=10))
    assert not fresh.due and fresh.next_due == NOW + timedelta(minutes=50)


# ----------------------------------------------------------------------------- readers


@dataclass
class _State:
    status: str
    finished_at: str | None
    credentials: tuple[str, ...]
    operation: str = "rotate"
    start: Any = field(init=False)

    def __post_init__(self) -> None:
        self.start = type("Start", (), {"credentials": self.credentials})()


@dataclass
class _Runs:
    states: list[_State]
    reads: int = 0
    where: str = "test"

    def load_runs(self) -> Iterator[Any]:
        self.reads += 1
        return iter(self.states)


def test_last_successes_take_the_latest_successful_rotation_of_each_member() -> None:
    runs = _Runs([
        _State("succeeded", "2026-12-05T03:05:00Z", ("dragonfly", "postgres")),
        _State("succeeded", "2026-12-04T03:05:00Z", ("dragonfly",)),
        _State("failed", "2026-12-05T04:00:00Z", ("dragonfly",)),
        _State("succeeded", "2026-12-05T04:10:00Z", ("dragonfly",), operation="rollback"),
    ])
    assert last_successes(runs) == {
        "dragonfly": datetime(2026, 12, 5, 3, 5, tzinfo=UTC),
        "postgres": datetime(2026, 12, 5, 3, 5, tzinfo=UTC)}


def test_due_credentials_reads_metadata_only_and_journals_only_for_a_schedule(
        tmp_path: Path) -> None:
    chain = _chain(tmp_path, "    maxAge: 1h\n")
    vault = FakeVault()
    vault.versions["infra/dragonfly"] = [{"password": "x"}]  # created 2026-01-01
    runs = _Runs([])
    (found,) = due_credentials(chain, chain.credentials.values(), vault, runs, NOW)
    assert found.due and found.version == 1 and runs.reads == 0
    assert found.written_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert found.to_json()["backend"] == {"path": "secret/infra/dragonfly#password",
                                          "version": 1, "written_at": "2026-01-01T00:00:00Z"}


def test_an_unreadable_backend_is_that_credentials_error_never_a_crash(tmp_path: Path
                                                                      ) -> None:
    chain = _chain(tmp_path, "    schedule: \"@daily\"\n")
    vault = FakeVault()
    vault.faults.arm("read_metadata", ForbiddenError("vault", "read_metadata", "permission "
                                                      "denied", status=403))
    (found,) = due_credentials(chain, chain.credentials.values(), vault, _Runs([]), NOW)
    assert not found.due and found.next_due is None
    assert found.error.startswith("cannot read secret/infra/dragonfly#password: vault")
