"""A long step's progress: what its wait observes reaches the observer as typed data, through
the engine's executor, and piped output turns it into heartbeat lines (cli.md "Progress").

The heartbeat is driven by hand with an injected clock: nothing here sleeps.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rotate.cli.console import Console
from rotate.cli.progress import PlainProgress, elapsed
from rotate.core.errors import TemporaryError
from rotate.core.observation import Observation, observed_by
from rotate.core.secret import Secret
from rotate.core.waiting import Deadline, WaitTimeout, wait_for
from rotate.engine.model import PlannedStep, StepRecord
from tests.fakes.world import World, assert_no_secret
from tests.support.engine import RecordingObserver, run


def test_a_wait_reports_each_new_observation_typed_and_times_out_with_its_detail() -> None:
    seen: list[Observation] = []
    count = Observation("d: 0 of 3 new replicas updated", 0, 3, "pods updated")
    states = iter([count, count, "connection refused", "done"])
    last: list[str | Observation] = ["nothing yet"]

    def check() -> str | None:
        state = next(states)
        if state == "connection refused":
            raise TemporaryError("kubernetes", "get deployment", "connection refused")
        if state == "done":
            return "done"
        last[0] = state
        return None

    with observed_by(seen.append):
        assert wait_for(check, deadline=Deadline.after(30), what="rollout",
                        describe=lambda: last[0], pause=lambda _s: None) == "done"
    assert [o.short for o in seen] == ["0/3 pods updated",  # once: it did not change
                                       "kubernetes: get deployment: connection refused"]
    assert (seen[0].done, seen[0].total) == (0, 3)  # a count, not only words
    with pytest.raises(WaitTimeout) as info:  # the timeout quotes the detail, as before
        wait_for(lambda: None, deadline=Deadline.after(0), what="rollout",
                 describe=lambda: count)
    assert info.value.last == "d: 0 of 3 new replicas updated"


def test_without_a_sink_nothing_is_reported_and_a_failing_sink_never_fails_the_wait() -> None:
    calls = iter([None, "ok"])
    assert wait_for(lambda: next(calls), deadline=Deadline.after(5), what="x",
                    describe=lambda: "not yet", pause=lambda _s: None) == "ok"

    def broken(_o: Observation) -> None:
        raise RuntimeError("display broke")

    calls = iter([None, "ok"])
    with observed_by(broken):
        assert wait_for(lambda: next(calls), deadline=Deadline.after(5), what="x",
                        describe=lambda: "not yet", pause=lambda _s: None) == "ok"


def test_an_observation_refuses_a_secret() -> None:
    with pytest.raises(TypeError, match="never holds a Secret"):
        Observation(Secret("s3cret-value-0123456789"))  # type: ignore[arg-type]


def test_a_stuck_rollout_is_observed_by_its_step_and_the_count_is_typed(
        world: World, tmp_path: Path) -> None:
    """The engine binds each step's waits to the observer: the consumer rollout that hangs
    is seen as ``0/1 pods updated`` on consumer.wait, then released by the hook."""
    world.stuck.add("cart")
    observer = RecordingObserver()
    kicked: list[str] = []

    def release(step: PlannedStep, seen: Observation) -> None:
        if "cart" in step.target and not kicked:
            kicked.append(seen.short)
            world.kick("cart")

    observer.on_observe["consumer.wait"] = release
    report = run(world, tmp_path, observer)
    assert report.status == "succeeded", report.message
    assert kicked == ["0/1 pods updated"]
    waits = [o for kind, o in observer.observed if kind == "consumer.wait"]
    assert waits and waits[0].total == 1 and "deployment/shop/cart" in waits[0].detail
    passwords = [v["password"] for v in world.vault.versions["infra/dragonfly"]]
    assert_no_secret(repr(observer.observed), *passwords)


# -- piped output: the heartbeat ---------------------------------------------------------------
STEP = PlannedStep(9, 4, "consumer.wait", "Deployment shop/cart", "wait for the rollout")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def piped() -> tuple[PlainProgress, Clock]:
    """Plain progress (stderr is not a terminal under pytest) on a clock the test moves."""
    clock = Clock()
    fixed = datetime(2026, 12, 2, 14, 3, 5, tzinfo=UTC)
    return PlainProgress(Console(), lambda: fixed, 14, monotonic=clock, interval=10.0), clock


def test_piped_output_beats_at_a_fixed_interval_with_the_last_observation(
        piped: tuple[PlainProgress, Clock], capsys: pytest.CaptureFixture[str]) -> None:
    progress, clock = piped
    progress.step_started(STEP)
    clock.now += 9.9
    progress.beat()  # not yet due
    progress.step_observed(STEP, Observation("deployment/shop/cart: 1 of 2 updated replicas "
                                             "available", 1, 2, "pods available"))
    clock.now += 0.1
    progress.beat()
    progress.beat()  # the same instant: one line only
    clock.now += 25  # the checker came late: still one line, and the next one on the grid
    progress.beat()
    clock.now += 5
    progress.beat()
    progress.step_finished(STEP, StepRecord(9, 4, "consumer.wait", "Deployment shop/cart",
                                            "done", seconds=40.02, detail="rolled out"))
    clock.now += 60
    progress.beat()  # nothing runs
    t = "2026-12-02T14:03:05Z  [9/14] consumer.wait Deployment shop/cart …"
    assert capsys.readouterr().err.splitlines() == [
        t,
        f"{t} running 10s: 1/2 pods available",
        f"{t} running 35s: 1/2 pods available",
        f"{t} running 40s: 1/2 pods available",
        f"{t} done 40.02s",
    ]


def test_a_step_without_observation_still_beats_and_ages_read_in_minutes(
        piped: tuple[PlainProgress, Clock], capsys: pytest.CaptureFixture[str]) -> None:
    progress, clock = piped
    progress.step_started(STEP)
    clock.now += 125
    progress.beat()
    assert capsys.readouterr().err.splitlines()[-1].endswith("… running 2m05s")
    assert elapsed(7.9) == "7s" and elapsed(3600) == "60m00s"


# -- a terminal: the live view's rows ----------------------------------------------------------
def test_the_live_view_shows_a_running_steps_age_and_last_observation() -> None:
    from rotate.cli.progress import LiveProgress
    from rotate.cli.step_table import StepRow

    clock = Clock()
    progress = LiveProgress(Console(), lambda: datetime(2026, 12, 2, tzinfo=UTC), 14,
                            monotonic=clock)
    try:
        progress.step_started(STEP)
        clock.now += 12.4
        progress.step_observed(STEP, Observation("…", 2, 3, "pods available"))
        assert progress.rows() == [StepRow("9/14", 4, "consumer.wait", "Deployment shop/cart",
                                           "running", "12s", "2/3 pods available")]
        clock.now += 60
        assert progress.rows()[0].time == "1m12s"  # it ticks at each redraw
        progress.step_finished(STEP, StepRecord(9, 4, "consumer.wait", "Deployment shop/cart",
                                                "done", seconds=72.4, detail="rolled out"))
        assert progress.rows() == [StepRow("9/14", 4, "consumer.wait", "Deployment shop/cart",
                                           "done", "72.40s", "")]
    finally:
        progress.close()
