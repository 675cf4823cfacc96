"""The run journal: JSON Lines, appended and fsynced before and after every step.

``<state dir>/runs/<run id>/journal.jsonl``.  The journal is the source of truth for a run:
``resume`` and ``rollback`` rebuild their state from it, and the run report is a view of it.

Record shape::

    {"ts": RFC3339, "event": "run.start" | "run.resume" | "step.start" | "step.done"
                             | "step.progress" | "step.failed" | "step.skipped"
                             | "step.interrupted" | "run.undo"
                             | "run.end" | "run.rolled-back",
     "index", "stage", "kind", "target"   (step events only: which step),
     "data": {...versions, names, token ids, generations, timings...}}

``run.undo`` (rotate.engine.undo) adds steps beyond the plan — the undo of steps prepared
ahead of a stage that failed — with ``steps``, ``undoes`` (undo step index → prepared step
index), ``seeds`` (the prepared step's data each undo step starts from) and ``cause`` (the
failure).  A prepared step whose undo is done reads as *undone* (``RunState.undone``) until
it starts again.

Files: the state directory, ``runs/`` and each run's directory are created 0700 and the
journal 0600, whatever the umask — a journal names paths, hosts and holders, and is nobody
else's business. ``run.start``/``run.resume`` carry the writing process (host, pid): a run
left "running" by a process that is gone from this host (``kill -9``) reads as interrupted.

Torn records: a process killed mid-write leaves a line that does not parse.  The reader
skips such a line and reads every complete record after it, and a writer opening a journal
whose last line has no line end starts its first record on a new line — so a resume after a
crash is never hidden behind the crashed process's half record.  (A record written before
that rule on the torn line's tail is found again: every record starts ``{"data": `` — keys
are sorted — and the complete one is the tail that parses to the end of the line.)  A journal
whose first complete record is not ``run.start`` is unreadable (:class:`JournalUnreadable`,
exit 6), named by its path.

Invariant: no secret value is ever written.  Besides discipline in the callers, every
record is walked before writing and a :class:`Secret` anywhere in it raises TypeError —
belt and braces, because a journal is a file that outlives the run and gets attached to
tickets.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rotate.core.errors import EXIT_INTERRUPTED, JournalUnreadable, UsageError
from rotate.core.secret import Secret
from rotate.core.strategy import Strategy
from rotate.core.timestamps import rfc3339, utcnow
from rotate.engine.journal_lines import parse_records, read_records, torn_tail
from rotate.engine.model import Operation, PlannedStep
from rotate.engine.run_start import RunStart, phases_untyped

JOURNAL_NAME = "journal.jsonl"
#: the kind of the journal's record of preflight (step 0: not a step kind, never resumed)
PREFLIGHT = "preflight"


def run_dir(state_dir: Path, run_id: str) -> Path:
    return state_dir / "runs" / run_id


def journal_path(state_dir: Path, run_id: str) -> Path:
    return run_dir(state_dir, run_id) / JOURNAL_NAME


def _refuse_secrets(value: Any, where: str = "record") -> None:
    if isinstance(value, Secret):
        raise TypeError(f"refusing to journal a secret value at {where}")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _refuse_secrets(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _refuse_secrets(v, f"{where}[{i}]")


def _no_default(value: Any) -> Any:
    raise TypeError(f"cannot journal a {type(value).__name__}")


def _not_a_directory(state_dir: Path) -> UsageError:
    return UsageError(f"state directory {state_dir} is not a directory",
                      hint="point --state-dir (or ROTATE_STATE_DIR, XDG_STATE_HOME) at a "
                           "directory, or move the file away")


def check_state_dir(state_dir: Path) -> None:
    """UsageError (exit 2) when ``state_dir`` or one of its parents exists as a non-directory."""
    for path in (state_dir, *state_dir.parents):
        if path.exists():
            if not path.is_dir():
                raise _not_a_directory(state_dir)
            return


def private_dirs(state_dir: Path, run_id: str) -> Path:
    """Create state dir, ``runs/`` and the run's directory 0700 (umask notwithstanding);
    directories that already existed are left as they are, except rotate's own ``runs/``."""
    check_state_dir(state_dir)
    target = run_dir(state_dir, run_id)
    try:
        missing = []
        path = target
        while not path.exists():
            missing.append(path)
            path = path.parent
        for path in reversed(missing):
            path.mkdir(mode=0o700)
            os.chmod(path, 0o700)
        os.chmod(target.parent, 0o700)
    except NotADirectoryError:
        raise _not_a_directory(state_dir) from None
    except OSError as exc:
        raise UsageError(f"cannot create the run directory {target}: "
                         f"{exc.strerror or 'not allowed'}") from None
    return target


class Mirror(Protocol):
    """What copies the journal elsewhere as it grows (rotate.engine.runstore: the cluster)."""

    def nudge(self) -> None:
        """A record was appended and fsynced: copy it when you can (never blocks)."""

    def close(self) -> None:
        """The journal is closed: copy what is left, within a bounded time."""


class Journal:
    """Append-only writer; thread-safe (parallel consumer steps share one journal).

    ``mirror``: told of every record once it is fsynced here — the local file stays the
    source of truth, the copy never holds up a step."""

    def __init__(self, path: Path, mirror: Mirror | None = None) -> None:
        self.path = path
        self.mirror = mirror
        self._lock = threading.Lock()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # open() made it 0700
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)
        self._fh = open(fd, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if torn_tail(path):
            self._fh.write("\n")  # the next record must not extend a crashed process's line

    @classmethod
    def open(cls, state_dir: Path, run_id: str) -> Journal:
        private_dirs(state_dir, run_id)
        return cls(journal_path(state_dir, run_id))

    def append(
        self, event: str, *, step: PlannedStep | None = None, data: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        record: dict[str, Any] = {"ts": rfc3339(utcnow()), "event": event}
        if step is not None:
            record.update(index=step.index, stage=step.stage, kind=step.kind, target=step.target)
        record["data"] = dict(data or {})
        if event in ("run.start", "run.resume"):
            import socket  # here: `rotate list` reads journals and never writes one

            record["data"]["process"] = {"host": socket.gethostname(), "pid": os.getpid()}
        _refuse_secrets(record)
        line = json.dumps(record, default=_no_default, sort_keys=True)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if self.mirror is not None:
            self.mirror.nudge()
        return record

    def close(self) -> None:
        with self._lock:
            if self._fh.closed:
                return
            self._fh.close()
        if self.mirror is not None:
            self.mirror.close()


# --------------------------------------------------------------------------- reading


@dataclass
class StepState:
    step: PlannedStep
    status: str = "pending"  # pending | running | done | failed | skipped | interrupted
    started_at: str | None = None
    finished_at: str | None = None
    seconds: float | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # merged start + done data
    #: the position in the journal of the step's last ``step.start`` (0: never started) —
    #: the order steps ran in across resumes, whatever the clocks of the hosts that ran them
    started_seq: int = 0


@dataclass
class RunState:
    """Everything a journal says about one run."""

    run_id: str
    start: RunStart
    steps: list[StepState]
    started_at: str
    finished_at: str | None = None
    status: str = "running"
    exit_code: int | None = None
    message: str = ""
    rolled_back_by: str | None = None
    #: Kubernetes Events of the run's last process: {"created": n, "failed": m}
    events: dict[str, int] | None = None
    #: undo step index → index of the prepared step it undoes (every ``run.undo`` so far)
    undo_of: dict[int, int] = field(default_factory=dict)
    #: the steps of the latest ``run.undo``, and the failure that caused it
    undo_round: tuple[int, ...] = ()
    undo_cause: dict[str, Any] = field(default_factory=dict)
    #: prepared steps whose undo is done and which have not started again since
    undone: set[int] = field(default_factory=set)

    @property
    def credential(self) -> str:
        return self.start.credential

    @property
    def operation(self) -> Operation:
        return self.start.operation

    @property
    def strategy(self) -> Strategy:
        return self.start.strategy

    def done(self, kind: str) -> list[StepState]:
        return [s for s in self.steps if s.step.kind == kind and s.status == "done"]


def load(state_dir: Path, run_id: str) -> RunState:
    """Rebuild a run's state; UsageError when there is no such run."""
    path = journal_path(state_dir, run_id)
    if "/" in run_id or not path.is_file():
        raise UsageError(f"no run {run_id!r} in {state_dir / 'runs'}")
    return load_file(path, run_id)


def load_file(path: Path, run_id: str) -> RunState:
    """The run's state from its journal; JournalUnreadable (exit 6) when it holds no
    readable ``run.start`` record first."""
    return load_records(read_records(path, run_id), run_id, str(path))


def load_text(text: bytes, run_id: str, where: str) -> RunState:
    """The run's state from its journal's bytes, kept ``where`` (for messages)."""
    return load_records(parse_records(text), run_id, where)


def load_records(records: list[dict[str, Any]], run_id: str, path: str) -> RunState:
    if not records or records[0].get("event") != "run.start":
        raise JournalUnreadable(run_id, path, "its first record is not a run.start")
    try:
        return _state(records, run_id)
    except (KeyError, ValueError, TypeError, AttributeError):
        raise JournalUnreadable(run_id, path, "it holds a malformed record") from None


def _state(records: list[dict[str, Any]], run_id: str) -> RunState:
    start = RunStart.from_json(records[0]["data"])
    if start.operation == "rollback" and phases_untyped(records[0]["data"]):
        from rotate.engine.kinds import read_untyped_rollback  # only journals that old

        start = read_untyped_rollback(start)
    state = RunState(run_id=run_id, start=start, steps=[StepState(s) for s in start.steps],
                     started_at=str(records[0]["ts"]))
    by_index = {s.step.index: s for s in state.steps}
    process: Any = records[0]["data"].get("process")
    for seq, rec in enumerate(records[1:], start=1):
        event = rec.get("event", "")
        data = rec.get("data") or {}
        if event.startswith("step.") and "index" in rec:
            st = by_index.get(int(rec["index"]))
            if st is None:
                continue
            _apply_step(st, event, str(rec["ts"]), data)
            if event == "step.start":
                st.started_seq = seq
            _track_undone(state, st.step.index, event)
        elif event == "run.undo":
            _add_undo(state, by_index, data)
        elif event == "run.end":
            state.status = str(data.get("status", "failed"))
            state.exit_code = int(data.get("exit_code", 1))
            state.message = str(data.get("message", ""))
            state.finished_at = str(rec["ts"])
            counts = data.get("events")
            if isinstance(counts, dict):
                state.events = {str(k): int(v) for k, v in counts.items()}
        elif event == "run.resume":
            state.status = "running"
            state.finished_at = None
            state.exit_code = None
            process = data.get("process") or process
        elif event == "run.rolled-back":
            state.status = "rolled-back"
            state.rolled_back_by = str(data.get("by", ""))
    if state.status == "running" and _gone(process):
        _mark_interrupted(state, process)
    return state


def _add_undo(state: RunState, by_index: dict[int, StepState], data: Mapping[str, Any]) -> None:
    """The steps a ``run.undo`` record adds beyond the plan."""
    seeds = data.get("seeds") or {}
    added: list[int] = []
    for raw in data.get("steps") or []:
        step = PlannedStep.from_json(raw)
        st = StepState(step, data={"undoes": dict(seeds.get(str(step.index)) or {})})
        state.steps.append(st)
        by_index[step.index] = st
        added.append(step.index)
    for new, old in (data.get("undoes") or {}).items():
        state.undo_of[int(new)] = int(old)
    state.undo_round = tuple(added)
    state.undo_cause = dict(data.get("cause") or {})


def _track_undone(state: RunState, index: int, event: str) -> None:
    if event == "step.start":
        state.undone.discard(index)
    elif event == "step.done" and index in state.undo_of:
        state.undone.add(state.undo_of[index])


def _gone(process: Any) -> bool:
    """Whether the process that last ran the journal is known dead: it ran on this host and
    its pid no longer exists. Another host, or no record, cannot be told from here."""
    import socket

    if not isinstance(process, Mapping) or process.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(process.get("pid", 0)), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError, TypeError, OverflowError):
        return False
    return False


def _mark_interrupted(state: RunState, process: Mapping[str, Any]) -> None:
    state.status = "interrupted"
    state.exit_code = EXIT_INTERRUPTED
    state.message = (f"the process that ran it (pid {process.get('pid')} on "
                     f"{process.get('host')}) is gone without journaling its end (killed?); "
                     f"continue with `rotate resume {state.run_id} --confirm`")
    for st in state.steps:
        if st.status == "running":
            st.status = "interrupted"


def _apply_step(st: StepState, event: str, ts: str, data: Mapping[str, Any]) -> None:
    if event == "step.progress":
        st.data.update(data)
        return
    if event == "step.start":
        st.data.update(data)
        st.status = "running"
        st.started_at = ts
        st.finished_at = None
        st.seconds = None
        st.detail = ""
        return
    st.data.update(data)
    st.finished_at = ts
    st.detail = str(data.get("detail", st.detail))
    if isinstance(data.get("seconds"), int | float):
        st.seconds = float(data["seconds"])
    st.status = {"step.done": "done", "step.failed": "failed", "step.skipped": "skipped",
                 "step.interrupted": "interrupted"}.get(event, st.status)


def has_ended(state_dir: Path, run_id: str) -> bool:
    """Whether the run journaled its end (``run.end`` after its last start or resume)."""
    try:
        return load(state_dir, run_id).finished_at is not None
    except (UsageError, JournalUnreadable, OSError, KeyError, ValueError, TypeError):
        return False


def list_run_ids(state_dir: Path) -> list[str]:
    """Run ids with a journal, newest first.

    A run id starts with its UTC start to the second; runs started within the same second
    (a rotation and the resume or rollback an operator types right after a failure, two
    credentials started by one script) are ordered by their ``run.start`` record's time, to
    the microsecond — the id's random suffix would order them by chance, and "newest first"
    decides which run ``runs.unfinished`` takes as a credential's latest."""
    check_state_dir(state_dir)
    root = state_dir / "runs"
    if not root.is_dir():
        return []
    ids = [p.name for p in root.iterdir() if (p / JOURNAL_NAME).is_file()]
    seconds = Counter(_second(i) for i in ids)

    def newest(run_id: str) -> tuple[str, str]:
        tied = seconds[_second(run_id)] > 1
        return _second(run_id), _start_time(root / run_id) if tied else ""

    return sorted(ids, key=newest, reverse=True)


def _second(run_id: str) -> str:
    return run_id.split("-", 1)[0]


def _start_time(run: Path) -> str:
    """The first record's RFC 3339 time (always with microseconds); "" when unreadable."""
    try:
        with (run / JOURNAL_NAME).open(encoding="utf-8") as f:
            return str(json.loads(f.readline()).get("ts", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def load_runs(
    state_dir: Path, unreadable: list[JournalUnreadable] | None = None,
) -> Iterator[RunState]:
    """Every run's state, newest first, read one journal at a time as the caller asks (a
    caller that stops early reads no more); an unreadable journal is skipped — it must not
    hide the others — and added to ``unreadable`` when given (``rotate runs`` names it)."""
    for run_id in list_run_ids(state_dir):
        try:
            state = load(state_dir, run_id)
        except JournalUnreadable as exc:
            if unreadable is not None:
                unreadable.append(exc)
            continue
        except UsageError:
            continue  # removed since it was listed
        yield state
