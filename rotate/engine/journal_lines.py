"""The journal's lines as records: what a crash mid-write leaves behind is skipped, never
a reason to stop reading (rotate.engine.journal, "Torn records").

A record is one line of JSON written by ``json.dumps(..., sort_keys=True)``, so it starts
``{"data": ``.  A writer killed mid-record leaves a line that does not parse (a *torn*
line); every complete line after it still counts.  A journal written before writers started
a new line after a torn tail may hold a complete record on the torn line's tail: it is the
tail, from one of its ``{"data": `` starts, that parses to the end of the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rotate.core.errors import JournalUnreadable


def torn_tail(path: Path) -> bool:
    """Whether the file ends inside a line (a writer killed mid-record)."""
    with open(path, "rb") as fh:
        if fh.seek(0, os.SEEK_END) == 0:
            return False
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


def read_records(path: Path, run_id: str) -> list[dict[str, Any]]:
    """Every complete record, in order; a torn line (it does not parse) is skipped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise JournalUnreadable(run_id, str(path),
                                f"cannot read it: {exc.strerror or 'not readable'}") from None
    return parse_records(raw)


def parse_records(raw: bytes) -> list[dict[str, Any]]:
    """Every complete record of a journal's bytes (wherever they were kept), in order."""
    records: list[dict[str, Any]] = []
    for line in raw.split(b"\n"):
        if line.strip():
            record = _record(line)
            if record is not None:
                records.append(record)
    return records


#: how every record starts (json.dumps with sort_keys: "data" is the first key)
_RECORD_START = b'{"data": '


def _record(line: bytes) -> dict[str, Any] | None:
    """The record on ``line``; a torn line yields None, or the complete record written on
    its tail (by a writer that did not yet start after a torn line on a new line)."""
    for start in _starts(line):
        try:
            record = json.loads(line[start:].decode("utf-8"))
        except ValueError:  # UnicodeDecodeError included
            continue
        if isinstance(record, dict):
            return record
    return None


def _starts(line: bytes) -> Iterator[int]:
    yield 0
    at = line.find(_RECORD_START, 1)
    while at != -1:
        yield at
        at = line.find(_RECORD_START, at + 1)
