"""Failure at each stage: exit code, explanation, journal; resume never writes a 2nd value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rotate.core.errors import PermanentError, TemporaryError
from rotate.core.waiting import CancelToken
from rotate.engine.kinds import REGISTRY
from rotate.engine.model import PlannedStep
from tests.fakes import World
from tests.support.engine import (
    RecordingObserver,
    journal_lines,
    resume,
    run,
)

Setup = Callable[[World, RecordingObserver], None]
Repair = Callable[[World], None]


def _eso_stall(w: World, o: RecordingObserver) -> None:
    w.eso_mode = "stall"


def _eso_fix(w: World) -> None:
    w.eso_mode = "ok"


def _provider_stuck(w: World, o: RecordingObserver) -> None:
    w.stuck.add("dragonfly")


def _provider_fix(w: World) -> None:
    w.kick("dragonfly", "dragonfly")


def _harvest_break(w: World, o: RecordingObserver) -> None:
    svc = w.kube.raw("Service", "dragonfly", "dragonfly")
    o.on_start["config.harvest"] = lambda step: svc["spec"].update(ports=[{"name": "x",
                                                                           "port": 1}])


def _harvest_fix(w: World) -> None:
    w.kube.raw("Service", "dragonfly", "dragonfly")["spec"]["ports"] = [
        {"name": "redis", "port": 6379}]


def _cc_down(w: World, o: RecordingObserver) -> None:
    w.cc.faults.arm("put_key", TemporaryError("config center", "put", "unavailable"), times=-1)


def _mint_down(w: World, o: RecordingObserver) -> None:
    w.cc.faults.arm("mint_token", TemporaryError("config center", "mint", "unavailable"),
                    times=-1)


def _cc_fix(w: World) -> None:
    w.cc.faults.clear()


def _order_stuck(w: World, o: RecordingObserver) -> None:
    w.stuck.add("order")


def _order_fix(w: World) -> None:
    w.kick("order")


def _readyz_fail(w: World, o: RecordingObserver) -> None:
    def sabotage(step: PlannedStep) -> None:
        w.running["user"] = "stale"
    o.on_start["readyz.check"] = sabotage


def _readyz_fix(w: World) -> None:
    w.running["user"] = w.running["dragonfly"]


def _vault_down(w: World, o: RecordingObserver) -> None:
    w.vault.faults.arm("write", TemporaryError("vault", "write", "unavailable"), times=-1)


def _vault_fix(w: World) -> None:
    w.vault.faults.clear()


CASES = [
    ("backend.write", 10, _vault_down, _vault_fix),
    ("sync.wait", 11, _eso_stall, _eso_fix),
    ("provider.wait", 12, _provider_stuck, _provider_fix),
    ("config.harvest", 13, _harvest_break, _harvest_fix),
    ("config.write", 13, _cc_down, _cc_fix),
    ("token.mint", 14, _mint_down, _cc_fix),
    ("consumer.wait", 15, _order_stuck, _order_fix),
    ("readyz.check", 16, _readyz_fail, _readyz_fix),
]


@pytest.mark.parametrize(("kind", "code", "setup", "repair"), CASES,
                         ids=[c[0] for c in CASES])
def test_failure_exit_code_then_resume(
    world: World, tmp_path: Path, kind: str, code: int, setup: Setup, repair: Repair
) -> None:
    obs = RecordingObserver()
    setup(world, obs)
    report = run(world, tmp_path, obs, timeout=0.4)
    assert report.status == "failed"
    assert report.exit_code == code
    failed = [s for s in report.steps if s.status == "failed"]
    # a parallel kind fails for every consumer its group ran; only that kind fails
    assert {s.kind for s in failed} == {kind}
    assert len(failed) == 1 or REGISTRY[(kind, "main")].parallel
    assert f"rotate resume {report.run_id} --confirm" in report.message
    assert f"rotate rollback {report.run_id} --confirm" in report.message
    assert report.resume == f"rotate resume {report.run_id} --confirm"
    writes_before = world.vault.writes
    assert writes_before == (0 if kind == "backend.write" else 1)
    # the lock was released even though the run failed
    assert ("Lease", "rotate-system", "rotate-dragonfly") not in world.kube.objects

    repair(world)
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert resumed.exit_code == 0
    assert world.vault.writes == 1  # never a second value
    new = world.vault.current("infra/dragonfly", "password")
    assert world.kube.secret_value("dragonfly", "dragonfly-password-secret", "password") == new
    for name in ("cart", "order", "user"):
        assert world.cc.docs[(name, "bootstrap")][-1]["dragonfly"]["password"] == new
        assert world.running[name] == new
    text = json.dumps(journal_lines(tmp_path, report.run_id))
    assert new not in text


def test_failure_message_says_what_runs_with_which_value(world: World, tmp_path: Path) -> None:
    world.stuck.add("order")
    report = run(world, tmp_path, timeout=0.4)
    assert report.exit_code == 15
    msg = report.message
    assert "consumer.wait" in msg and "deployment/shop/order" in msg
    assert "holds v3" in msg and "deployment/dragonfly/dragonfly rolled" in msg
    assert "cart, user rolled with the new value" in msg
    assert "order still runs with the old value, which the provider refuses since the " \
        "switch" in msg


def test_crash_after_vault_write_is_observed_not_rewritten(world: World, tmp_path: Path) -> None:
    # The write lands, then the process "dies" before the journal says done (a permanent
    # error: a temporary one would be retried within the step, see the test below).
    world.vault.faults.arm("set_custom_metadata",
                           PermanentError("vault", "metadata", "refused"), skip=1)
    report = run(world, tmp_path)
    assert report.exit_code == 10
    assert world.vault.writes == 1
    written = world.vault.current("infra/dragonfly", "password")
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert world.vault.writes == 1
    assert world.kube.secret_value("dragonfly", "dragonfly-password-secret",
                                   "password") == written
    step = next(s for s in resumed.steps if s.kind == "backend.write")
    assert "not written again" in step.detail


def test_eso_error_fails_at_once_with_its_message(world: World, tmp_path: Path) -> None:
    world.eso_mode = "error"
    report = run(world, tmp_path, timeout=30)
    assert report.exit_code == 11
    step = next(s for s in report.steps if s.kind == "sync.wait")
    assert step.seconds is not None and step.seconds < 5
    assert "SecretSyncedError" in step.detail and "could not get secret data" in step.detail


def test_interrupt_exits_130_and_is_resumable(world: World, tmp_path: Path) -> None:
    cancel = CancelToken()
    obs = RecordingObserver()
    world.stuck.add("dragonfly")
    obs.on_start["provider.wait"] = lambda step: cancel.cancel("SIGINT")
    report = run(world, tmp_path, obs, cancel, timeout=30)
    assert report.status == "interrupted"
    assert report.exit_code == 130
    wait = next(s for s in report.steps if s.kind == "provider.wait")
    assert wait.status == "pending" and "interrupted" in wait.detail
    assert any(r["event"] == "step.interrupted" for r in journal_lines(tmp_path, report.run_id))
    assert ("Lease", "rotate-system", "rotate-dragonfly") not in world.kube.objects
    world.kick("dragonfly", "dragonfly")
    resumed = resume(world, tmp_path, report.run_id)
    assert resumed.status == "succeeded", resumed.message
    assert world.vault.writes == 1


def test_resume_of_succeeded_run_is_refused(world: World, tmp_path: Path) -> None:
    from rotate.core.errors import UsageError

    report = run(world, tmp_path)
    with pytest.raises(UsageError):
        resume(world, tmp_path, report.run_id)


def test_config_write_applied_but_unacknowledged_is_not_written_twice(
    world: World, tmp_path: Path
) -> None:
    # The server applies the write, the answer is lost: the retry observes it, writes nothing.
    world.cc.faults.arm("put_key_applied", TemporaryError("config center", "put", "timed out"))
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    # config.write runs as a parallel group: the one armed fault hits whichever consumer's
    # write comes first, so exactly one step observed its applied write; none wrote twice
    for svc in ("cart", "order", "user"):
        assert len(world.cc.docs[(svc, "bootstrap")]) == 2  # v1 seeded, v2 written once
    writes = [s for s in report.steps if s.kind == "config.write"]
    assert len(writes) == 3
    assert sum("already written" in s.detail for s in writes) == 1


def test_token_minted_but_not_delivered_is_revoked_at_the_end(
    world: World, tmp_path: Path
) -> None:
    world.kube.faults.arm("write_secret_key",
                          TemporaryError("kubernetes", "write secret", "unavailable"), skip=1)
    report = run(world, tmp_path)  # skip=1: ESO's own write of the Secret passes
    assert report.status == "succeeded", report.message
    orphan = world.cc.tokens["cart"][-2]["id"]  # minted, then its delivery failed
    live = [t["id"] for t in world.cc.tokens["cart"] if not t["revoked"]]
    assert len(live) == 1 and orphan not in live


@pytest.mark.parametrize("fault", ["vault", "config center"])
def test_a_passing_outage_is_retried_within_the_step(
    world: World, tmp_path: Path, fault: str
) -> None:
    # One TemporaryError (a restart, a 503) is not a failed step: the handler runs again.
    if fault == "vault":
        world.vault.faults.arm("write", TemporaryError("vault", "write", "unavailable"))
    else:
        world.cc.faults.arm("put_key", TemporaryError("config center", "put", "unavailable"))
    report = run(world, tmp_path, RecordingObserver(), timeout=5)
    assert report.status == "succeeded", report.message
    assert world.vault.writes == 1


def test_an_outage_that_outlasts_the_step_deadline_fails_the_step(
    world: World, tmp_path: Path
) -> None:
    world.cc.faults.arm("put_key", TemporaryError("config center", "put", "unavailable"),
                        times=-1)
    report = run(world, tmp_path, RecordingObserver(), timeout=0.5)
    assert report.exit_code == 13
    assert "unavailable" in report.message and "config.write" in report.message
