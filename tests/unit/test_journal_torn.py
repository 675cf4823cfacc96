"""Journals a crash or a stray file left behind: a torn record (a line that does not parse)
hides no complete record after it, and the next writer starts on a new line; a journal that
cannot be read at all is named by `runs` (which still lists the others) and `show`, exit 6,
never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from rotate.cli.app import app
from rotate.core.errors import EXIT_JOURNAL_UNREADABLE, JournalUnreadable
from rotate.engine import journal as journal_mod
from rotate.engine.journal_lines import read_records
from tests.fakes import World
from tests.support.engine import (
    options,
    resume,
    run,
)

TORN = b'{"data": {"detail": "interrupted mid-wri'
BINARY = bytes(range(256)) * 4


def journal_of(tmp_path: Path, run_id: str) -> Path:
    return tmp_path / "state" / "runs" / run_id / "journal.jsonl"


def failed_run(world: World, tmp_path: Path) -> str:
    """A run that failed at sync.wait (exit 11), its journal ending in a torn record."""
    world.eso_mode = "stall"
    report = run(world, tmp_path, timeout=0.4)
    assert report.exit_code == 11
    world.eso_mode = "ok"
    with journal_of(tmp_path, report.run_id).open("ab") as fh:
        fh.write(TORN)
    return report.run_id


def test_a_resume_after_a_torn_record_is_read_to_its_end(
    world: World, tmp_path: Path
) -> None:
    run_id = failed_run(world, tmp_path)
    resumed = resume(world, tmp_path, run_id)
    assert (resumed.status, resumed.exit_code) == ("succeeded", 0), resumed.message
    lines = journal_of(tmp_path, run_id).read_bytes().split(b"\n")
    assert TORN in lines  # alone on its line: the resume's first record started a new one
    engine = world.engine()
    assert engine.show(options(tmp_path), run_id).status == "succeeded"
    assert [(r.run_id, r.status) for r in engine.runs(options(tmp_path))] == [
        (run_id, "succeeded")]
    # the run is settled: the next rotation does not refuse it as unfinished
    following = run(world, tmp_path)
    assert (following.status, following.exit_code) == ("succeeded", 0), following.message


def test_a_record_written_on_a_torn_line_is_found_again(tmp_path: Path) -> None:
    """A journal written before the new-line rule: the resume's records on the torn line's
    tail are read, and so is everything after it."""
    journal = journal_mod.Journal.open(tmp_path, "r1")
    journal.append("run.start", data={"run_id": "r1", "credential": "c", "steps": []})
    journal.close()
    path = journal.path
    end = json.dumps({"data": {"status": "succeeded", "exit_code": 0, "message": ""},
                      "event": "run.end", "ts": "2026-12-04T00:00:00.000000Z"},
                     sort_keys=True)
    resumed = json.dumps({"data": {"holder": "me"}, "event": "run.resume",
                          "ts": "2026-12-04T00:00:00.000000Z"}, sort_keys=True)
    with path.open("ab") as fh:
        fh.write(TORN + resumed.encode() + b"\n" + b"\xff\xfe torn \xc3\n" + end.encode()
                 + b"\n")
    state = journal_mod.load(tmp_path, "r1")
    assert (state.status, state.exit_code) == ("succeeded", 0)
    records = read_records(path, "r1")
    assert [r["event"] for r in records] == ["run.start", "run.resume", "run.end"]


def test_a_writer_after_a_torn_tail_starts_a_new_line(tmp_path: Path) -> None:
    journal = journal_mod.Journal.open(tmp_path, "r1")
    journal.append("run.start", data={})
    journal.close()
    with journal.path.open("ab") as fh:
        fh.write(TORN)
    again = journal_mod.Journal.open(tmp_path, "r1")
    again.append("run.resume", data={})
    again.close()
    lines = journal.path.read_bytes().split(b"\n")
    assert lines[1] == TORN and json.loads(lines[2])["event"] == "run.resume"
    assert lines[3] == b""
    # a journal ending on a line end gets no empty line
    third = journal_mod.Journal.open(tmp_path, "r1")
    third.append("run.resume", data={})
    third.close()
    assert b"\n\n" not in journal.path.read_bytes()


@pytest.mark.parametrize("content", [BINARY, b"", b"\n\n", b'{"event": "step.start"}\n',
                                     b'{"data": [1], "event": "run.start", "ts": "x"}\n'])
def test_a_journal_that_is_not_a_runs_records_is_unreadable(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "runs" / "r1" / "journal.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(JournalUnreadable) as exc:
        journal_mod.load(tmp_path, "r1")
    assert exc.value.exit_code == EXIT_JOURNAL_UNREADABLE == 6
    assert str(path) in exc.value.message and exc.value.run_id == "r1"


def _rotate(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", "COLUMNS": "200"},
                              catch_exceptions=False)


def test_runs_and_show_name_an_unreadable_journal(world: World, tmp_path: Path) -> None:
    good = run(world, tmp_path)
    assert good.status == "succeeded"
    state = tmp_path / "state"
    bad_id = "20261204T000000Z-dragonfly-bad0"
    bad = state / "runs" / bad_id / "journal.jsonl"
    bad.parent.mkdir()
    bad.write_bytes(BINARY)

    listed = _rotate("runs", "--state-dir", str(state))
    assert listed.exit_code == EXIT_JOURNAL_UNREADABLE, listed.output
    assert good.run_id in listed.stdout  # the readable run is still listed
    assert f"the journal of run {bad_id} is unreadable" in listed.stderr
    assert str(bad) in listed.stderr and "Traceback" not in listed.output

    doc = _rotate("runs", "--state-dir", str(state), "-o", "json")
    assert doc.exit_code == EXIT_JOURNAL_UNREADABLE
    document = json.loads(doc.stdout)
    assert [r["run_id"] for r in document["runs"]] == [good.run_id]
    assert document["unreadable"] == [{"run_id": bad_id, "journal": str(bad),
                                       "reason": "its first record is not a run.start"}]

    shown = _rotate("show", bad_id, "--state-dir", str(state))
    assert shown.exit_code == EXIT_JOURNAL_UNREADABLE, shown.output
    assert str(bad) in shown.stderr
    assert "internal error" not in shown.output and "Traceback" not in shown.output
    shown_json = _rotate("show", bad_id, "--state-dir", str(state), "-o", "json")
    assert json.loads(shown_json.stdout)["error"] == "JournalUnreadable"
    assert _rotate("show", good.run_id, "--state-dir", str(state)).exit_code == 0
