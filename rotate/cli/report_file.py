"""``--report-file PATH``: the command's JSON document, written to a file for CI.

The file receives exactly the document ``-o json`` would print on stdout (docs/cli.md): the
run report after a run, resume or rollback — whatever its outcome —, the plan when planning
or when preflight refused the run, or the error document when the command stopped with an
error. So a CI job always finds a file with ``kind`` and ``exit_code`` (or ``ok``) once the
options were parsed.

Invariants: the file is created with mode 0600 (it names objects, versions and token ids,
never a value, but it is nobody else's business) and replaced atomically — a reader never
sees half a document; a problem with PATH is found at parse time (usage error, exit 2),
before anything changes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import typer


def check_report_path(value: Path | None) -> Path | None:
    """typer callback: PATH must be a file whose directory exists (usage error otherwise)."""
    if value is None:
        return None
    if value.is_dir():
        raise typer.BadParameter(f"{value} is a directory; give a file name")
    parent = value.parent if str(value.parent) else Path(".")
    if not parent.is_dir():
        raise typer.BadParameter(f"directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise typer.BadParameter(f"directory {parent} is not writable")
    return value


def write_report_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically with mode 0600 (raises OSError)."""
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=".rotate-report-", dir=parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
