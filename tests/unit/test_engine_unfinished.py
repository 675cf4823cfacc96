"""A new run does not start on top of a half-rotated chain, and a resume does not fight a
later run (rotate.engine.unfinished; cli.md "Continue or undo")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rotate.core.errors import PermanentError, PreflightFailed, TemporaryError
from rotate.core.waiting import CancelToken
from tests.fakes import World
from tests.support.engine import (
    RecordingObserver,
    options,
    resume,
    rollback,
    run,
)


def _interrupted(world: World, tmp_path: Path) -> str:
    """A run stopped after its backend write (at sync.wait): the chain is half-rotated."""
    cancel, observer = CancelToken(), RecordingObserver()
    observer.on_start["sync.wait"] = lambda _step: cancel.cancel()
    report = run(world, tmp_path, observer, cancel)
    assert report.exit_code == 130, report.message
    return report.run_id


def _check(world: World, tmp_path: Path, **kw: object) -> tuple[bool, str]:
    plan = world.engine().plan(options(tmp_path, **kw), "dragonfly")
    [check] = [c for c in plan.preflight if c.check == "runs.unfinished"]
    return (check.ok and plan.ok), check.detail


def test_an_unfinished_run_blocks_the_next_plan_and_run(world: World, tmp_path: Path) -> None:
    first = _interrupted(world, tmp_path)
    ok, detail = _check(world, tmp_path)
    assert not ok
    assert detail.startswith(f"run {first} (rotate, interrupted at step ")
    assert f"`rotate resume {first} --confirm`" in detail
    assert f"`rotate rollback {first} --confirm`" in detail
    assert "--force" in detail
    writes = world.vault.writes
    with pytest.raises(PreflightFailed) as exc:
        run(world, tmp_path)
    assert "runs.unfinished" in exc.value.message
    assert world.vault.writes == writes  # nothing changed

    assert rollback(world, tmp_path, first).status == "succeeded"
    ok, detail = _check(world, tmp_path)
    assert ok, detail
    assert run(world, tmp_path).status == "succeeded"


def test_a_run_that_changed_nothing_does_not_block(world: World, tmp_path: Path) -> None:
    cancel, observer = CancelToken(), RecordingObserver()
    observer.on_start["preflight"] = lambda _step: cancel.cancel()  # before backend.write
    stopped = run(world, tmp_path, observer, cancel)
    assert stopped.exit_code == 130, stopped.message
    assert world.vault.writes == 0
    ok, detail = _check(world, tmp_path)
    assert ok, detail
    assert detail.startswith("no unfinished run of dragonfly")


def test_a_failed_backend_write_blocks_and_its_resume_is_the_way_on(
        world: World, tmp_path: Path) -> None:
    # the write may have landed before the failure: the run is resumed (it observes the
    # backend and writes at most once), not replaced by a second run
    world.vault.faults.arm("write", TemporaryError("vault", "write", "unavailable"), times=-1)
    failed = run(world, tmp_path, timeout=0.3)
    assert failed.exit_code == 10, failed.message
    world.vault.faults.clear()
    ok, detail = _check(world, tmp_path)
    assert not ok and "failed at step 1 backend.write" in detail
    assert resume(world, tmp_path, failed.run_id).status == "succeeded"
    assert world.vault.writes == 1
    assert _check(world, tmp_path)[0]


def test_force_starts_anyway_and_the_overtaken_run_cannot_be_resumed(
        world: World, tmp_path: Path) -> None:
    first = _interrupted(world, tmp_path)
    ok, detail = _check(world, tmp_path, force=True)
    assert ok
    assert "--force: starting anyway, and that run can then no longer be resumed" in detail
    second = world.engine().run(options(tmp_path, force=True), "dragonfly",
                                RecordingObserver(), CancelToken())
    assert second.status == "succeeded", second.message

    writes = world.vault.writes
    with pytest.raises(PreflightFailed) as exc:
        resume(world, tmp_path, first)
    assert exc.value.message.startswith(
        f"run {first} cannot be resumed, nothing was changed: a later run of dragonfly "
        f"changed the chain since — {second.run_id} (rotate, succeeded)")
    assert world.vault.writes == writes
    # the later run is the one to act on; the earlier one's rollback names it
    with pytest.raises(PreflightFailed) as refused:
        rollback(world, tmp_path, first)
    assert f"later runs: {second.run_id} (rotate, succeeded)" in refused.value.message


def test_a_rollback_with_nothing_to_restore_settles_the_run(world: World,
                                                            tmp_path: Path) -> None:
    # the write was refused: the run changed nothing, but the journal cannot know that
    # until its rollback looks at the backend — which then settles it as rolled back
    world.vault.faults.arm("write", PermanentError("vault", "write", "refused"), times=-1)
    failed = run(world, tmp_path)
    assert failed.exit_code == 10, failed.message
    world.vault.faults.clear()
    assert not _check(world, tmp_path)[0]
    rb = rollback(world, tmp_path, failed.run_id)
    assert rb.status == "succeeded" and "nothing to roll back" in rb.message
    assert world.engine().show(options(tmp_path), failed.run_id).status == "rolled-back"
    assert _check(world, tmp_path)[0]
    assert run(world, tmp_path).status == "succeeded"


def test_an_unreadable_journal_hides_neither_the_runs_nor_an_unfinished_one(
        world: World, tmp_path: Path) -> None:
    first = _interrupted(world, tmp_path)
    broken = tmp_path / "state" / "runs" / "29991231T000000Z-dragonfly-0000"
    broken.mkdir(parents=True)
    (broken / "journal.jsonl").write_text('{"event": "step.start"}\n')  # no run.start
    assert [r.run_id for r in world.engine().runs(options(tmp_path))] == [first]
    ok, detail = _check(world, tmp_path)
    assert not ok and detail.startswith(f"run {first} ")


def test_the_runs_after_a_run_are_found_without_reading_older_journals(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Newest first, the reading stops at the run itself: an older run's journal is not
    read, and the later one is found."""
    from rotate.engine import journal as journal_mod
    from rotate.engine.runstore import RunStore
    from rotate.engine.unfinished import later_runs

    older, orig, later = (run(world, tmp_path).run_id for _ in range(3))
    runs = RunStore(tmp_path / "state")
    orig_state = runs.load(orig)
    read: list[str] = []
    load = RunStore.load

    def counting(self: RunStore, run_id: str) -> journal_mod.RunState:
        read.append(run_id)
        return load(self, run_id)
    monkeypatch.setattr(RunStore, "load", counting)
    assert [s.run_id for s in later_runs(runs, orig_state)] == [later]
    assert older not in read and orig in read
