"""The state directory and its journals: private whatever the umask, a path that is not a
directory is a usage error (exit 2), and a run whose process died without journaling its end
(kill -9) reads as interrupted."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rotate.core.errors import UsageError
from rotate.engine import journal as journal_mod
from rotate.engine.journal import Journal
from rotate.engine.model import PlannedStep

RUN = "20261203T070000Z-dragonfly-abcd"
STEP = PlannedStep(1, 1, "backend.write", "secret/infra/dragonfly#password")


@pytest.fixture(params=[0o022, 0o000, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_state_dir_runs_and_journal_are_private_whatever_the_umask(
    tmp_path: Path, umask: int
) -> None:
    state = tmp_path / "xdg" / "rotate"
    journal = Journal.open(state, RUN)
    journal.append("run.start", data={"run_id": RUN, "steps": []})
    journal.close()
    assert mode(state) == 0o700
    assert mode(state / "runs") == 0o700
    assert mode(state / "runs" / RUN) == 0o700
    assert mode(journal.path) == 0o600


def test_a_state_dir_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "state"
    not_a_dir.write_text("oops")
    with pytest.raises(UsageError, match=f"state directory {not_a_dir} is not a directory"):
        Journal.open(not_a_dir, RUN)
    with pytest.raises(UsageError, match="is not a directory"):
        journal_mod.list_run_ids(not_a_dir)


def test_runs_started_within_one_second_are_newest_first_by_their_start_record(
        tmp_path: Path) -> None:
    """Run ids are exact to the second only: within one second the journal's run.start time
    orders them (the random suffixes here would order them the other way)."""
    state = tmp_path / "state"
    started = {"20261203T070000Z-dragonfly-ffff": "2026-12-03T07:00:00.100000Z",
               "20261203T070000Z-dragonfly-0000": "2026-12-03T07:00:00.900000Z",
               "20261203T065959Z-dragonfly-9999": "2026-12-03T06:59:59.999999Z",
               "20261203T070001Z-dragonfly-1111": "2026-12-03T07:00:01.000000Z"}
    for run_id, ts in started.items():
        path = journal_mod.journal_path(state, run_id)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"ts": ts, "event": "run.start", "data": {}}) + "\n")
    assert journal_mod.list_run_ids(state) == [
        "20261203T070001Z-dragonfly-1111", "20261203T070000Z-dragonfly-0000",
        "20261203T070000Z-dragonfly-ffff", "20261203T065959Z-dragonfly-9999"]


def _journal(state: Path, *, pid: int, host: str, ended: bool = False) -> None:
    """A journal as a run on ``host`` with ``pid`` leaves it, killed in its first step."""
    path = journal_mod.journal_path(state, RUN)
    path.parent.mkdir(parents=True)
    records = [
        {"ts": "2026-12-03T07:00:00Z", "event": "run.start",
         "data": {"run_id": RUN, "credential": "dragonfly", "operation": "rotate",
                  "steps": [STEP.to_json()], "process": {"host": host, "pid": pid}}},
        {"ts": "2026-12-03T07:00:01Z", "event": "step.start", "index": 1, "stage": 1,
         "kind": STEP.kind, "target": STEP.target, "data": {}},
    ]
    if ended:
        records.append({"ts": "2026-12-03T07:00:02Z", "event": "run.end",
                        "data": {"status": "failed", "exit_code": 10}})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_run_whose_process_is_gone_reads_as_interrupted(tmp_path: Path) -> None:
    _journal(tmp_path, pid=dead_pid(), host=socket.gethostname())
    state = journal_mod.load(tmp_path, RUN)
    assert state.status == "interrupted"
    assert state.exit_code == 130
    assert "is gone" in state.message and "rotate resume" in state.message
    assert state.steps[0].status == "interrupted"


@pytest.mark.parametrize(("pid", "host"), [
    (os.getpid(), socket.gethostname()),  # alive
    (dead_pid(), "another-host.example"),  # cannot tell from here
], ids=["alive-here", "another-host"])  # fixed ids: pytest-xdist workers must agree on them
def test_a_run_that_may_be_alive_still_reads_as_running(
    tmp_path: Path, pid: int, host: str
) -> None:
    _journal(tmp_path, pid=pid, host=host)
    assert journal_mod.load(tmp_path, RUN).status == "running"


def test_a_finished_run_keeps_its_status(tmp_path: Path) -> None:
    _journal(tmp_path, pid=dead_pid(), host=socket.gethostname(), ended=True)
    assert journal_mod.load(tmp_path, RUN).status == "failed"


def test_the_journal_records_the_process_that_runs_it(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path, RUN)
    journal.append("run.start", data={"run_id": RUN, "steps": []})
    journal.append("run.resume", data={})
    journal.close()
    records = [json.loads(line) for line in journal.path.read_text().splitlines()]
    for rec in records:
        assert rec["data"]["process"] == {"host": socket.gethostname(), "pid": os.getpid()}
