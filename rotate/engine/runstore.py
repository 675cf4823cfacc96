"""Every run's journal, wherever it is kept: the state directory and the cluster as one.

Where (docs/design.md "Where the journal lives"): each run's journal is kept in the state
directory (:class:`~rotate.engine.local_journals.LocalJournals`) and in the cluster
(:class:`~rotate.clients.cluster_journals.ClusterJournals`, ConfigMaps in the lock
namespace).  ``rotate runs``, ``show``, ``resume``, ``rollback`` and the unfinished-run guard
read both, so they work from any machine or pod with the permissions, whatever its state
directory.

Invariants:

* The process running a run appends to its local file first (fsynced: the source of truth);
  a :class:`~rotate.engine.journal_mirror.ClusterMirror` copies the file to the cluster behind
  it, never holding up a step.  While the cluster copy is behind, the run directory holds a
  ``cluster-pending`` marker; the next command that opens this store with the cluster
  reachable catches such a run up (:meth:`RunStore.catch_up`) — nothing journaled is lost.
* Both copies only grow, so one is a byte prefix of the other: the longer is the run.  A
  cluster copy that is ahead (the run was resumed elsewhere) replaces the local cache.  Two
  copies that differ beyond a common prefix (two writers, which the Lease forbids) are never
  merged or overwritten: the cluster copy is read, the local file is left as it is, and a
  write to that run is refused naming both.
* The cluster unreachable is never fatal to a read: the local runs are read, and a warning
  says the cluster was not.
* Retention (:data:`RETENTION`): when a run ends, the cluster keeps the newest
  ``RETENTION`` runs of its credential and every older run left unfinished after it changed
  something (resume and rollback need it); older finished ones are deleted from the cluster.
  The local directory is never pruned: it is the operator's.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from rotate.clients.journal_seam import JournalStore, StoredJournal
from rotate.core.errors import ClientError, JournalUnreadable, NotFoundError, UsageError
from rotate.engine import journal as journal_mod
from rotate.engine.journal import Journal, RunState
from rotate.engine.local_journals import LocalJournals, credentials_of

#: runs of a credential the cluster keeps (every unfinished one that changed something too)
RETENTION = 20
PENDING = "cluster-pending"
Warn = Callable[[str], None]


def _ignore(_text: str) -> None:
    return None


class RunStore:
    """The runs of one state directory and, when given, of the cluster."""

    def __init__(self, state_dir: Path, cluster: JournalStore | None = None,
                 warn: Warn = _ignore) -> None:
        self.state_dir = state_dir
        self.local = LocalJournals(state_dir)
        self.cluster = cluster
        self._warn = warn
        self._warned: set[str] = set()
        self._listed: dict[str, StoredJournal] | None = None

    @property
    def where(self) -> str:
        if self.cluster is None:
            return str(self.state_dir)
        return f"{self.state_dir} or {self.cluster.where}"

    def warn_once(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self._warn(text)

    def _unreachable(self, exc: ClientError) -> None:
        assert self.cluster is not None
        if "unreachable" in self._warned:
            return
        self._warned.add("unreachable")
        self._warn(f"the run journals in the cluster ({self.cluster.where}) could not "
                       f"be read ({exc.message}); only {self.state_dir / 'runs'} was read")

    # ------------------------------------------------------------------ reading

    def _remote(self, run_id: str) -> StoredJournal | None:
        if self.cluster is None:
            return None
        if self._listed is not None:  # listed moments ago: absent there is absent
            return self._listed.get(run_id)
        try:
            return self.cluster.read(run_id)
        except NotFoundError:
            return None
        except ClientError as exc:
            self._unreachable(exc)
            return None

    def text(self, run_id: str) -> bytes | None:
        """The run's journal: the longer of the two copies (the local cache updated when the
        cluster's is ahead); None when neither has it."""
        try:
            local: StoredJournal | None = self.local.read(run_id)
        except ClientError:
            local = None
        remote = self._remote(run_id)
        if remote is None:
            return local.text if local is not None else None
        if local is None or (remote.text.startswith(local.text)
                             and len(remote.text) > len(local.text)):
            self._cache(run_id, remote, local)
            return remote.text
        if local.text.startswith(remote.text):
            return local.text
        self.warn_once(f"run {run_id}: the journal in {self.local.path(run_id)} and the one "
                       f"in the cluster differ; the cluster's is read, the local one is left "
                       "as it is")
        return remote.text

    def _cache(self, run_id: str, remote: StoredJournal, local: StoredJournal | None) -> None:
        with contextlib.suppress(ClientError):  # a cache: read from the cluster next time too
            self.local.write(run_id, remote.text, credentials=remote.credentials,
                             version=local.version if local is not None else None)

    def load(self, run_id: str) -> RunState:
        """UsageError when no copy of the run exists; JournalUnreadable (exit 6)."""
        if "/" in run_id or not run_id or run_id.startswith("."):
            raise UsageError(f"no run {run_id!r} in {self.where}")
        text = self.text(run_id)
        if text is None:
            raise UsageError(f"no run {run_id!r} in {self.where}")
        return journal_mod.load_text(text, run_id, self._where(run_id))

    def _where(self, run_id: str) -> str:
        path = self.local.path(run_id)
        return str(path) if path.is_file() or self.cluster is None else (
            f"{self.cluster.where} (run {run_id})")

    def run_ids(self) -> list[str]:
        """Every run with a journal here or in the cluster, newest first (runs started in the
        same second by their first record's time, as journal.list_run_ids)."""
        ids = set(journal_mod.list_run_ids(self.state_dir))
        self._listed = None
        if self.cluster is not None:
            try:
                self._listed = {j.run_id: j for j in self.cluster.journals()}
            except ClientError as exc:
                self._unreachable(exc)
            ids |= set(self._listed or ())
        seconds = Counter(i.split("-", 1)[0] for i in ids)

        def newest(run_id: str) -> tuple[str, str]:
            second = run_id.split("-", 1)[0]
            return second, self._start_time(run_id) if seconds[second] > 1 else ""

        return sorted(ids, key=newest, reverse=True)

    def _start_time(self, run_id: str) -> str:
        return _first_ts(self.text(run_id) or b"")

    def load_runs(self, unreadable: list[JournalUnreadable] | None = None
                  ) -> Iterator[RunState]:
        """Every run's state, newest first, read as the caller asks (journal.load_runs)."""
        for run_id in self.run_ids():
            try:
                state = self.load(run_id)
            except JournalUnreadable as exc:
                if unreadable is not None:
                    unreadable.append(exc)
                continue
            except UsageError:
                continue
            yield state

    def has_ended(self, run_id: str) -> bool:
        try:
            return self.load(run_id).finished_at is not None
        except (UsageError, JournalUnreadable):
            return False

    def has_started(self, run_id: str) -> bool:
        return self.local.path(run_id).exists() or self._remote(run_id) is not None

    # ------------------------------------------------------------------ writing

    def open_journal(self, run_id: str) -> Journal:
        """The run's journal to append to, here, its local copy first brought up to the
        cluster's; mirrored to the cluster.  UsageError when the two copies differ."""
        from rotate.engine.journal_mirror import ClusterMirror

        journal_mod.check_state_dir(self.state_dir)
        self._listed = None  # a listing is a moment's: a write starts from the run itself
        try:
            local: StoredJournal | None = self.local.read(run_id)
        except ClientError:
            local = None
        remote = self._remote(run_id)
        if remote is not None and local is not None and not (
                remote.text.startswith(local.text) or local.text.startswith(remote.text)):
            raise UsageError(
                f"run {run_id}: the journal in {self.local.path(run_id)} and the one in the "
                "cluster differ (two processes wrote it); nothing was changed",
                hint=f"compare them (`kubectl get cm -n {self._namespace()} "
                     f"-l rotate.dev/journal=run`), keep one, remove the other")
        if remote is not None and (local is None or len(remote.text) > len(local.text)):
            journal_mod.private_dirs(self.state_dir, run_id)
            self._cache(run_id, remote, local)
        journal = Journal.open(self.state_dir, run_id)
        if self.cluster is not None:
            self._mark_pending(run_id)
            journal.mirror = ClusterMirror(self.cluster, run_id, journal.path, remote,
                                           warn=self.warn_once,
                                           closed=lambda done: self._closed(run_id, done))
        return journal

    def _closed(self, run_id: str, caught_up: bool) -> None:
        """A run's mirror closed.  The cluster holding its whole journal: settled, and
        retention applied (again at the next run's end, should it fail now); otherwise the
        marker no longer names a live writer, so that the next catch-up copies it."""
        if not caught_up:
            self._mark_pending(run_id, writer=False)
            return
        self.settled(run_id)
        with contextlib.suppress(ClientError, OSError):
            self.prune(credentials_of(self.local.path(run_id).read_bytes()))

    def _namespace(self) -> str:
        return str(getattr(self.cluster, "namespace", "NAMESPACE"))

    def _marker(self, run_id: str) -> Path:
        return self.local.path(run_id).parent / PENDING

    def _mark_pending(self, run_id: str, *, writer: bool = True) -> None:
        """The marker of a run whose cluster copy may be behind, naming the process writing
        it (``writer``) or none (it closed the journal)."""
        marker = self._marker(run_id)
        who = {"host": socket.gethostname(), "pid": os.getpid()} if writer else {}
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "w", encoding="utf-8") as fh:
                json.dump(who, fh)
        except OSError:
            pass

    def settled(self, run_id: str) -> None:
        """The cluster holds the whole local journal: no catch-up needed."""
        self._marker(run_id).unlink(missing_ok=True)

    def catch_up(self) -> list[str]:
        """Copy to the cluster every local run whose copy there is behind and whose writer is
        gone (a run that could not reach the API server, or was killed); the run ids
        caught up.  A live writer's own mirror does it: its run is left alone."""
        from rotate.engine.journal_mirror import push

        root = self.state_dir / "runs"
        if self.cluster is None or not root.is_dir():
            return []
        done = []
        for marker in sorted(root.glob(f"*/{PENDING}")):
            run_id = marker.parent.name
            if _writer_alive(marker):
                continue
            try:
                if push(self.cluster, run_id, self.local.read(run_id).text):
                    self.settled(run_id)
                    done.append(run_id)
                else:
                    self.warn_once(f"run {run_id}: the journal in {self.local.path(run_id)} "
                                   "and the one in the cluster differ; neither is changed")
            except ClientError as exc:
                self.warn_once(f"run {run_id}'s journal is not in the cluster yet and could "
                               f"not be copied there ({exc.message}); it stays in "
                               f"{self.local.path(run_id)} and is copied on the next command")
                break
        return done

    def prune(self, credentials: tuple[str, ...]) -> list[str]:
        """Apply :data:`RETENTION` to the cluster's runs of ``credentials``; the run ids
        deleted there."""
        from rotate.engine.unfinished import OPEN, changed_something

        if self.cluster is None:
            return []
        deleted: list[str] = []
        for credential in credentials:
            stored = {j.run_id: j for j in self.cluster.journals(credential)}
            newest_first = sorted(stored, reverse=True, key=lambda r: (
                r.split("-", 1)[0], _first_ts(stored[r].text)))
            for run_id in newest_first[RETENTION:]:
                try:
                    state = journal_mod.load_text(stored[run_id].text, run_id, run_id)
                except JournalUnreadable:
                    state = None
                if state is not None and state.status in OPEN and changed_something(state):
                    continue
                self.cluster.delete(run_id)
                deleted.append(run_id)
        return deleted


def _first_ts(text: bytes) -> str:
    """The first record's RFC 3339 time (microseconds: orders runs of one second)."""
    try:
        return str(json.loads(text.split(b"\n", 1)[0]).get("ts", ""))
    except (ValueError, AttributeError):
        return ""


def _writer_alive(marker: Path) -> bool:
    """Whether the process that wrote ``marker`` still runs on this host."""
    try:
        who = json.loads(marker.read_text(encoding="utf-8"))
        if who.get("host") != socket.gethostname():
            return False
        os.kill(int(who.get("pid", 0)), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError, TypeError, AttributeError, OverflowError):
        return False
    return True
