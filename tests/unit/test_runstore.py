"""Run journals kept in the cluster as well as locally (rotate.engine.runstore,
docs/design.md "Where the journal lives"): read from any state directory, caught up after
the API server was unreachable, never overwritten when two copies differ, bounded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rotate.clients.cluster_journals import ClusterJournals
from rotate.core.errors import PreflightFailed, TemporaryError, UsageError
from rotate.core.waiting import CancelToken
from rotate.engine import runstore as runstore_mod
from rotate.engine.runstore import PENDING, RunStore
from tests.fakes import FakeKube, World
from tests.support.engine import RecordingObserver, options, run

RUN = "20261205T013203Z-dragonfly-ab12"
START = b'{"data": {"credential": "dragonfly"}, "event": "run.start", "ts": "t"}\n'


def _cluster() -> tuple[FakeKube, ClusterJournals]:
    kube = FakeKube()
    kube.put({"kind": "Namespace", "metadata": {"name": "rotate-system", "namespace": ""}})
    return kube, ClusterJournals(kube, "rotate-system")


def _unreachable(kube: FakeKube) -> None:
    for op in ("get", "list", "create", "replace", "delete"):
        kube.faults.arm(op, TemporaryError("kubernetes", op, "unreachable"), times=-1)


def _write(store: RunStore, *lines: bytes) -> Path:
    journal = store.open_journal(RUN)
    with journal.path.open("ab") as fh:  # the records as Journal.append leaves them
        fh.write(b"".join(lines))
    journal.mirror.nudge()  # type: ignore[union-attr]
    journal.close()
    return journal.path


def test_a_journal_written_from_one_state_dir_is_read_from_another(tmp_path: Path) -> None:
    _, cluster = _cluster()
    a, b = RunStore(tmp_path / "a", cluster), RunStore(tmp_path / "b", cluster)
    path = _write(a, START, b'{"data": {}, "event": "step.start"}\n')
    assert cluster.read(RUN).text == path.read_bytes()
    assert not (path.parent / PENDING).exists()
    assert b.run_ids() == [RUN]
    assert b.text(RUN) == path.read_bytes()
    assert (tmp_path / "b" / "runs" / RUN / "journal.jsonl").read_bytes() == path.read_bytes()
    # B goes on with the run (a resume there); A then reads B's longer journal
    more = b'{"data": {}, "event": "run.resume"}\n'
    _write(b, more)
    assert a.text(RUN) == path.read_bytes() == cluster.read(RUN).text
    assert path.read_bytes().endswith(more)


def test_an_unreachable_api_server_loses_nothing_and_is_caught_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rotate.engine.journal_mirror.CLOSE_SECONDS", 0.5)
    kube, cluster = _cluster()
    warnings: list[str] = []
    a = RunStore(tmp_path / "a", cluster, warnings.append)
    _unreachable(kube)
    path = _write(a, START)
    assert (path.parent / PENDING).exists()
    assert any("not all in the cluster yet" in w for w in warnings), warnings
    kube.faults.clear()
    assert RunStore(tmp_path / "b", cluster).run_ids() == []
    assert a.catch_up() == [RUN]
    assert cluster.read(RUN).text == path.read_bytes()
    assert not (path.parent / PENDING).exists()
    assert RunStore(tmp_path / "b", cluster).text(RUN) == START


def test_reads_fall_back_to_the_state_dir_when_the_cluster_is_unreachable(
        tmp_path: Path) -> None:
    kube, cluster = _cluster()
    warnings: list[str] = []
    a = RunStore(tmp_path / "a", cluster, warnings.append)
    _write(a, START)
    _unreachable(kube)
    assert a.run_ids() == [RUN] and a.text(RUN) == START
    assert len(warnings) == 1 and "could not be read" in warnings[0]


def test_two_copies_that_differ_are_never_overwritten(tmp_path: Path) -> None:
    _, cluster = _cluster()
    warnings: list[str] = []
    a = RunStore(tmp_path / "a", cluster, warnings.append)
    path = _write(a, START)
    path.write_bytes(START.replace(b'"t"', b'"u"'))  # another history, written elsewhere
    with pytest.raises(UsageError) as exc:
        a.open_journal(RUN)
    assert "differ" in exc.value.message
    assert a.text(RUN) == START  # the cluster's is read, the local one left as it is
    assert path.read_bytes() != START and warnings


def test_a_run_killed_in_one_state_dir_is_seen_resumed_and_guarded_from_another(
        world: World, tmp_path: Path) -> None:
    cancel, observer = CancelToken(), RecordingObserver()
    observer.on_start["sync.wait"] = lambda _step: cancel.cancel()
    first = run(world, tmp_path, observer, cancel)
    assert first.exit_code == 130
    other = dataclasses.replace(options(tmp_path), state_dir=tmp_path / "elsewhere")
    engine = world.engine()
    assert [r.run_id for r in engine.runs(other)] == [first.run_id]
    with pytest.raises(PreflightFailed) as exc:
        engine.run(other, "dragonfly", RecordingObserver(), CancelToken())
    assert "runs.unfinished" in exc.value.message
    done = engine.resume(other, first.run_id, RecordingObserver(), CancelToken())
    assert done.status == "succeeded", done.message
    assert engine.show(options(tmp_path), first.run_id).status == "succeeded"


def test_the_cluster_keeps_the_newest_runs_and_the_unfinished_ones(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runstore_mod, "RETENTION", 2)
    cancel, observer = CancelToken(), RecordingObserver()
    observer.on_start["sync.wait"] = lambda _step: cancel.cancel()
    unfinished = run(world, tmp_path, observer, cancel, force=True).run_id
    finished = [run(world, tmp_path, force=True).run_id for _ in range(3)]
    kept = {j.run_id for j in ClusterJournals(world.kube, "rotate-system").journals()}
    assert kept == {unfinished, *finished[-2:]}
    # the state directory is the operator's: never pruned
    assert len(list((tmp_path / "state" / "runs").iterdir())) == 4


def test_a_run_whose_journal_missed_the_cluster_keeps_its_lock_until_caught_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run is not held up; its Leases are left to expire rather than released (no other
    machine may start on top of a run it cannot see), and the next command catches up."""
    from tests.fakes.kube import JournalUnreachableKube
    from tests.fakes.world import make_chain

    monkeypatch.setattr("rotate.engine.journal_mirror.CLOSE_SECONDS", 0.5)
    kube = JournalUnreachableKube()
    world = World(make_chain(tmp_path), kube=kube)
    world.setup()
    kube.journal_down = True
    report = run(world, tmp_path)
    assert report.status == "succeeded", report.message
    lease = kube.get("Lease", "rotate-system", "rotate-dragonfly")
    assert lease["spec"]["holderIdentity"].endswith(report.run_id)
    journals = ClusterJournals(kube, "rotate-system")
    kube.journal_down = False
    assert journals.journals() == []
    assert [r.run_id for r in world.engine().runs(options(tmp_path))] == [report.run_id]
    local = tmp_path / "state" / "runs" / report.run_id
    assert journals.read(report.run_id).text == (local / "journal.jsonl").read_bytes()
    assert not (local / PENDING).exists()
    kube.close()


def test_a_run_of_several_credentials_is_labelled_with_each_of_them(tmp_path: Path) -> None:
    """Its run.start names "a+b" and lists each member: each credential's listing in the
    cluster (the runs.unfinished check of another machine) finds it, pruning counts it."""
    from rotate.engine.local_journals import credentials_of

    start = (b'{"data": {"credential": "dragonfly+postgres", "members": [{"credential": '
             b'"dragonfly"}, {"credential": "postgres"}]}, "event": "run.start", "ts": "t"}\n')
    assert credentials_of(start) == ("dragonfly", "postgres")
    _kube, cluster = _cluster()
    store = RunStore(tmp_path, cluster)
    _write(store, start)
    for credential in ("dragonfly", "postgres"):
        assert [j.run_id for j in cluster.journals(credential)] == [RUN]
