"""Shell completion of CREDENTIAL — the credential names of the chain file, found cheaply —
and of RUN_ID (``show``, ``resume``, ``rollback``) — the run ids of the journal.

A completion runs on every Tab, so it must not load the chain file the full way (YAML with
line numbers, JSON Schema validation): :func:`credential_names` scans the block-style YAML
for the keys directly under the top-level ``credentials:`` mapping. A chain file written in
flow style (JSON) completes nothing — never an error: completion must never print one.

The chain file is ``ROTATE_CHAIN``, else ``./rotate.yaml``, as for the commands themselves.

Run ids are the names of the run directories that hold a journal
(``STATE/runs/<run id>/journal.jsonl``, rotate.engine.journal), newest first (a run id starts
with its UTC start), without reading any journal.  STATE is the command's own: ``--state-dir``
when typed before the Tab, else ``ROTATE_STATE_DIR``, else the default — without the note the
commands print when HOME is not set (completion prints nothing but completions).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

#: a mapping key on its own line: ``  name:`` (optionally quoted), nothing else but a comment
_KEY = re.compile(r"""^(?P<indent>[ ]+)(?P<q>["']?)(?P<name>[a-z0-9][-a-z0-9]*)(?P=q)\s*:"""
                  r"""\s*(#.*)?$""")
_TOP = re.compile(r"^\S")


def credential_names(chain_file: Path) -> list[str]:
    """The names under ``credentials:`` in ``chain_file``; [] when unreadable or not found."""
    if not chain_file.is_file():
        return []  # a named pipe would block the shell's Tab
    try:
        text = chain_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    names: list[str] = []
    inside, indent = False, ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if _TOP.match(line):
            inside = re.match(r"^credentials\s*:\s*(#.*)?$", line) is not None
            indent = ""
            continue
        if not inside:
            continue
        key = _KEY.match(line)
        if key is None:
            continue
        if not indent:
            indent = key.group("indent")
        if key.group("indent") == indent:
            names.append(key.group("name"))
    return names


def chain_for_completion() -> Path:
    """The chain file a completion reads: ``ROTATE_CHAIN``, else ``./rotate.yaml``. (The
    first word is completed before any ``--chain`` can be typed: options follow it.)"""
    return Path(os.environ.get("ROTATE_CHAIN") or "rotate.yaml")


#: the journal's name in a run directory (rotate.engine.journal.JOURNAL_NAME, not imported:
#: a Tab must not import the engine)
JOURNAL_NAME = "journal.jsonl"


def run_ids(state_dir: Path) -> list[str]:
    """The ids of the runs journaled in ``state_dir``, newest first; [] when unreadable."""
    try:
        entries = list(os.scandir(state_dir / "runs"))
    except OSError:
        return []
    ids = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False) and \
                    os.path.isfile(os.path.join(entry.path, JOURNAL_NAME)):
                ids.append(entry.name)
        except OSError:
            continue
    return sorted(ids, reverse=True)


def complete_run_id(ctx: Any, incomplete: str) -> list[str]:
    """The run ids starting with ``incomplete`` (typer's ``autocompletion`` of RUN_ID)."""
    from rotate.cli.options import default_state_dir

    given = getattr(ctx, "params", {}).get("state_dir") or os.environ.get("ROTATE_STATE_DIR")
    state_dir = Path(given) if given else default_state_dir()[0]
    return [run_id for run_id in run_ids(state_dir) if run_id.startswith(incomplete)]
