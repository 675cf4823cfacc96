"""A run ends by proving the backend still holds its version (``backend.confirm``, exit 17).

A write to the path after ``sync.wait`` (a ``bao kv put`` while the provider switches) is
invisible to every later step; without the proof the run said "succeeded" while OpenBao's
current version differed from the Secret, the provider and the documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rotate.core.errors import PreflightFailed
from rotate.core.secret import Secret
from rotate.engine.model import PlannedStep
from tests.fakes import World
from tests.support.engine import RecordingObserver, journal_lines, resume, rollback, run

PATH = "infra/dragonfly"
OTHER = "written-by-someone-else-0123456789"


def _put_during(world: World, kind: str) -> RecordingObserver:
    """A ``bao kv put`` of the path at the start of the first step of ``kind``."""
    obs = RecordingObserver()
    done: list[bool] = []

    def put(step: PlannedStep) -> None:
        if done:
            return
        done.append(True)
        current = len(world.vault.versions[PATH])
        world.vault.write(PATH, {"password": Secret(OTHER)}, cas=current)

    obs.on_start[kind] = put
    return obs


def test_a_write_after_the_sync_fails_the_run_with_17_naming_the_drift(
        world: World, tmp_path: Path) -> None:
    n = len(world.vault.versions[PATH])
    report = run(world, tmp_path, _put_during(world, "provider.restart"))
    assert report.status == "failed"
    assert report.exit_code == 17
    failed = [s for s in report.steps if s.status == "failed"]
    assert [s.kind for s in failed] == ["backend.confirm"]
    msg = report.message
    assert f"this run wrote v{n + 1}" in msg and f"current version is v{n + 2}" in msg
    assert "read at 20" in msg  # when it was read (RFC 3339)
    assert "not proven to be its current version" in msg  # the state now
    assert "bao kv rollback" in msg and "rotate resume" in msg  # the next command
    assert OTHER not in msg and OTHER not in json.dumps(journal_lines(tmp_path, report.run_id))
    # nothing was undone: the provider and every consumer hold the run's value
    run_value = world.vault.versions[PATH][n]["password"]
    for name in ("cart", "order", "user"):
        assert world.cc.docs[(name, "bootstrap")][-1]["dragonfly"]["password"] == run_value
        assert world.running[name] == run_value


def test_a_drifted_run_resumes_once_its_version_is_put_back(world: World,
                                                             tmp_path: Path) -> None:
    n = len(world.vault.versions[PATH])
    report = run(world, tmp_path, _put_during(world, "provider.restart"))
    assert report.exit_code == 17
    assert (f"`bao kv rollback -mount=secret -version={n + 1} {PATH}`" in report.message
            and f"rotate resume {report.run_id} --confirm" in report.message)
    again = resume(world, tmp_path, report.run_id)
    assert again.exit_code == 17 and f"current version is v{n + 2}" in again.message
    with pytest.raises(PreflightFailed):  # the backend moved since the run
        rollback(world, tmp_path, report.run_id)
    # what the message says to do: the run's version back as the current one, then resume
    ours = world.vault.read(PATH, n + 1)
    world.vault.write(PATH, ours, cas=n + 2)
    done = resume(world, tmp_path, report.run_id)
    assert done.status == "succeeded", done.message
    assert f"v{n + 3} holds what this run wrote as v{n + 1}" in done.steps[-1].detail
    value = world.vault.current(PATH, "password")
    assert value == world.kube.secret_value("dragonfly", "dragonfly-password-secret",
                                            "password")
    assert all(world.cc.docs[(c, "bootstrap")][-1]["dragonfly"]["password"] == value
               for c in ("cart", "order", "user"))


def test_an_undisturbed_run_proves_its_version_last(world: World, tmp_path: Path) -> None:
    n = len(world.vault.versions[PATH])
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    last = report.steps[-1]
    assert last.kind == "backend.confirm" and last.status == "done"
    assert f"v{n + 1} is still the current version" in last.detail


def test_a_rollback_proves_the_restored_version_last(world: World, tmp_path: Path) -> None:
    n = len(world.vault.versions[PATH])
    report = run(world, tmp_path)
    rb = rollback(world, tmp_path, report.run_id)
    assert rb.status == "succeeded", rb.message
    assert rb.steps[-1].kind == "backend.confirm"
    assert f"v{n + 2} is still the current version" in rb.steps[-1].detail
