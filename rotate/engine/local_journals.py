"""Run journals in the state directory: ``STATE/runs/<run id>/journal.jsonl`` (the
:class:`~rotate.clients.journal_seam.JournalStore` seam over files).

The process running a run appends to its file through :class:`rotate.engine.journal.Journal`
(flushed and fsynced per record: the source of truth while it runs); this store is how the
same files are read as a whole and how a journal read from the cluster is cached here
(:meth:`LocalJournals.write`: a temporary file, fsynced, renamed over — a reader never sees
half a copy).  A version is the file's length and a digest of its bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from rotate.clients.journal_seam import StoredJournal
from rotate.core.errors import ConflictError, NotFoundError, TemporaryError

SYSTEM = "state directory"


def version_of(text: bytes) -> str:
    return f"{len(text)}:{hashlib.sha256(text).hexdigest()[:16]}"


def credentials_of(text: bytes) -> tuple[str, ...]:
    """The credential(s) the journal's first record names (``credential``, the list
    ``credentials``, or a run of several's ``members``: each one's, not the joined name);
    () when it does not parse."""
    try:
        data = json.loads(text.split(b"\n", 1)[0]).get("data") or {}
    except (ValueError, AttributeError):
        return ()
    members = data.get("members")
    names = data.get("credentials") or (
        [m.get("credential") for m in members if isinstance(m, dict)]
        if isinstance(members, list) and members else [data.get("credential")])
    return tuple(str(n) for n in names if isinstance(n, str) and n)


class LocalJournals:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    @property
    def where(self) -> str:
        return str(self.state_dir / "runs")

    def path(self, run_id: str) -> Path:
        return self.state_dir / "runs" / run_id / "journal.jsonl"

    def journals(self, credential: str | None = None) -> list[StoredJournal]:
        root = self.state_dir / "runs"
        if not root.is_dir():
            return []
        out = []
        for run in root.iterdir():
            try:
                stored = self.read(run.name)
            except (NotFoundError, TemporaryError):
                continue
            if credential is None or credential in stored.credentials:
                out.append(stored)
        return out

    def read(self, run_id: str) -> StoredJournal:
        path = self.path(run_id)
        if "/" in run_id or not path.is_file():
            raise NotFoundError(SYSTEM, f"read the journal of run {run_id}", "not found")
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise TemporaryError(SYSTEM, f"read {path}",
                                 exc.strerror or "not readable") from None
        return StoredJournal(run_id, text, version_of(text), credentials_of(text))

    def write(self, run_id: str, text: bytes, *, credentials: tuple[str, ...],
              version: str | None) -> str:
        path = self.path(run_id)
        current = path.read_bytes() if path.is_file() else None
        if (version is None) != (current is None) or (
                current is not None and version_of(current) != version):
            raise ConflictError(SYSTEM, f"write the journal of run {run_id}",
                                "changed meanwhile")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "wb") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise TemporaryError(SYSTEM, f"write {path}",
                                 exc.strerror or "not writable") from None
        return version_of(text)

    def delete(self, run_id: str) -> None:
        path = self.path(run_id)
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()
