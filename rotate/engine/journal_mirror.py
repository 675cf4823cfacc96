"""The cluster copy of a journal being written: write-behind, batched, caught up later.

:class:`ClusterMirror` is the :class:`~rotate.engine.journal.Mirror` of a run's journal when
the cluster store is on (rotate.engine.runstore).  ``Journal.append`` fsyncs the record
locally, then only *nudges* the mirror; the mirror's thread copies the whole local file (all
records appended since its last copy, in one conditional write) to the cluster.  So a step
never waits for the API server, and a burst of records costs one request.

Invariants:

* The local file is the source of truth; the cluster copy is always one of its prefixes.
* An unreachable API server (any ClientError but a conflict) is retried with back-off
  (:data:`BACKOFF`) while the run goes on; on close the mirror tries once more for at most
  :data:`CLOSE_SECONDS`.  If the copy is still behind then, the run keeps its
  ``cluster-pending`` marker and the next command catches it up (RunStore.catch_up); a
  warning says so.  Nothing journaled is lost: it is in the fsynced local file.
* A conflict (someone else wrote the run's cluster copy) is resolved by reading the cluster
  copy again: when it is a prefix of the local file, the local file is written over it;
  otherwise the two differ and the mirror stops copying, with a warning (the Lease makes
  that a second writer that took the lock over).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from rotate.clients.journal_seam import JournalStore, StoredJournal
from rotate.core.errors import ClientError, ConflictError, NotFoundError
from rotate.engine.local_journals import credentials_of

#: seconds between attempts while the API server cannot be reached (then the last again)
BACKOFF = (0.5, 1.0, 2.0, 5.0)
#: how long closing a journal waits for the cluster copy to catch up
CLOSE_SECONDS = 10.0
#: how long the mirror lets records gather after the first before it copies them.  0: at
#: once — records appended while a copy is in flight still go together in the next one.  A
#: longer window saves requests but widens what a machine killed mid-run has not copied yet,
#: which another machine then cannot see (bench.faults "second machine …" failed at 0.25 s)
BATCH_SECONDS = 0.0


class Diverged(Exception):
    """The cluster copy is not a prefix of the local journal."""


class ClusterMirror:
    def __init__(self, cluster: JournalStore, run_id: str, path: Path,
                 known: StoredJournal | None, *, warn: Callable[[str], None],
                 closed: Callable[[bool], None]) -> None:
        """``closed``: called once on close with whether the cluster holds the whole
        journal."""
        self.cluster, self.run_id, self.path = cluster, run_id, path
        self._warn, self._closed = warn, closed
        #: the cluster copy's version and length as last seen; None: it has none
        self._version: str | None = known.version if known is not None else None
        self._synced = len(known.text) if known is not None else 0
        self._stale = False  # a conflict: read the cluster copy again before writing
        #: set on close: whether the cluster holds the whole journal
        self.caught_up = False
        self._diverged = False
        self._failed: ClientError | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=f"journal-{run_id}",
                                        daemon=True)
        self._thread.start()

    def nudge(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set() or (BATCH_SECONDS and self._stop.wait(BATCH_SECONDS)):
                return  # close() copies what is left
            self._wake.clear()
            if self.sync():
                attempt = 0
                continue
            if self._diverged:
                return
            delay = BACKOFF[min(attempt, len(BACKOFF) - 1)]
            attempt += 1
            if self._stop.wait(delay):
                return
            self._wake.set()

    def sync(self) -> bool:
        """Copy the local file if the cluster is behind; whether it is caught up now."""
        with self._lock:
            if self._diverged:
                return False
            try:
                text = self.path.read_bytes()
            except OSError:
                return False
            if len(text) == self._synced and not self._stale:
                return True
            try:
                self._write(text)
            except Diverged:
                self._diverged = True
                self._warn(
                    f"run {self.run_id}: the cluster copy of its journal differs from "
                    f"{self.path} (another process wrote it); the cluster copy is no longer "
                    "updated")
                return False
            except ClientError as exc:
                self._failed = exc
                return False
            self._failed = None
            return True

    def _write(self, text: bytes) -> None:
        if self._stale:
            try:
                remote: StoredJournal | None = self.cluster.read(self.run_id)
            except NotFoundError:
                remote = None
            if remote is not None and not text.startswith(remote.text):
                raise Diverged
            self._version = remote.version if remote is not None else None
            self._stale = False
        try:
            self._version = self.cluster.write(self.run_id, text,
                                               credentials=credentials_of(text),
                                               version=self._version)
        except ConflictError:
            self._stale = True
            raise
        self._synced = len(text)

    def close(self) -> None:
        """Stop the thread, copy what is left (bounded), settle or warn; prune on success."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=CLOSE_SECONDS)
        done = threading.Event()

        def last() -> None:
            for _ in range(3):  # a conflict is followed by a re-read and a second write
                if self.sync() or self._diverged:
                    break
            done.set()

        threading.Thread(target=last, name=f"journal-{self.run_id}-close", daemon=True).start()
        caught_up = done.wait(CLOSE_SECONDS) and not self._diverged and self._failed is None
        self.caught_up = caught_up
        self._closed(caught_up)
        if caught_up:
            return
        if not self._diverged:
            why = f" ({self._failed.message})" if self._failed is not None else ""
            self._warn(
                f"run {self.run_id}: its journal is not all in the cluster yet{why}; it is "
                f"whole in {self.path} and is copied to the cluster by the next rotate "
                "command run with this state directory")


def push(cluster: JournalStore, run_id: str, text: bytes) -> bool:
    """Catch up the cluster copy of a run no process is writing, to ``text`` (its local
    journal); True when the cluster holds all of it now.  A copy that differs is left as it
    is (False)."""
    try:
        remote: StoredJournal | None = cluster.read(run_id)
    except NotFoundError:
        remote = None
    if remote is not None and not text.startswith(remote.text):
        return remote.text.startswith(text)  # resumed elsewhere since: nothing of ours missing
    if remote is None or len(text) > len(remote.text):
        cluster.write(run_id, text, credentials=credentials_of(text),
                      version=remote.version if remote is not None else None)
    return True
