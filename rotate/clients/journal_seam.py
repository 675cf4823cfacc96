"""The journal store seam: where a run's journal is kept, as bytes.

Two stores fit it: :class:`rotate.engine.local_journals.LocalJournals` (the state directory:
the fsynced source of truth of the process writing a run, and a cache of every run read) and
:class:`rotate.clients.cluster_journals.ClusterJournals` (ConfigMaps in the lock namespace:
what every machine and pod with the permissions sees).  rotate.engine.runstore joins them.

The store never interprets the records (that is rotate.engine.journal's): it keeps the
journal's exact bytes, so a copy is a byte-for-byte prefix of the journal it mirrors and
"which is ahead" is a prefix test.  ``credentials`` (for listing) are handed in by the
caller.  One contract suite (tests/contracts/test_journal_store_contract.py) runs against
both stores, the cluster one on the lab's API server and on the fake Kube.

Contract: every method raises only ClientError subclasses (TemporaryError: try again; the
cluster is unreachable) — ConflictError when a conditional write finds another version,
NotFoundError when there is no such run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class StoredJournal:
    """A run's journal as stored: its bytes and the version a conditional write names."""

    run_id: str
    text: bytes
    version: str
    credentials: tuple[str, ...] = ()


class JournalStore(Protocol):
    @property
    def where(self) -> str:
        """Where the journals are, for messages (``ConfigMaps in rotate-system``)."""

    def journals(self, credential: str | None = None) -> list[StoredJournal]:
        """Every stored journal (of ``credential`` when given), in no order."""

    def read(self, run_id: str) -> StoredJournal:
        """One run's journal; NotFoundError when the store has none."""

    def write(self, run_id: str, text: bytes, *, credentials: tuple[str, ...],
              version: str | None) -> str:
        """Store ``text`` as the run's whole journal and return its new version.

        ``version`` None: create (ConflictError when the run exists); otherwise only while
        the stored version is still ``version`` (ConflictError when it moved)."""

    def delete(self, run_id: str) -> None:
        """Forget the run (no error when it is already gone)."""
