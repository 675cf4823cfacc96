"""One watch on the lab's store: a queue of ``{"type", "object"}`` events for one kind (and
namespace, label and field selectors), filled by the store as it commits writes.

Invariants, and why:

- Events are offered under the store's lock, in commit order, so a watcher sees every
  write after its start in resourceVersion order.
- Selector-aware, as Kubernetes: an object that stops matching is DELETED for this watcher,
  one that starts matching ADDED.
- A watcher :data:`WATCH_QUEUE_LIMIT` events behind is closed, not grown without bound: the
  client re-lists, as it does after a real API server's watch ends.
- Every event handed out is a copy (:func:`.jsontree.copy_tree`): the queue holds the
  store's own dicts, which are never mutated in place.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from rotate_lab.cluster.api.jsontree import copy_tree
from rotate_lab.cluster.api.resources import Kind
from rotate_lab.cluster.api.selectors import FieldSelector, LabelSelector

Obj = dict[str, Any]
WATCH_QUEUE_LIMIT = 10_000


class Watch:
    """A stream of ``{"type", "object"}`` events for one kind (and namespace/selectors)."""

    def __init__(self, unregister: Callable[[Watch], None], kind: Kind, namespace: str | None,
                 labels: LabelSelector, fields: FieldSelector) -> None:
        self._unregister = unregister
        self.kind = kind
        self._namespace = namespace
        self._labels = labels
        self._fields = fields
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[tuple[str, Obj]] = deque()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> bool:
        """Events are queued, not yet handed out by :meth:`next`."""
        with self._cond:
            return bool(self._queue)

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        md = obj.get("metadata") or {}
        if self._namespace is not None and md.get("namespace") != self._namespace:
            return False
        return self._labels.matches(md.get("labels")) and self._fields.matches(obj)

    def _offer(self, ev_type: str, old: Obj | None, new: Obj) -> None:
        """Called under the store lock.  Selector-aware, as Kubernetes: an object that stops
        matching is DELETED for this watcher, one that starts matching is ADDED."""
        was, now = (self._matches(old), self._matches(new))
        if ev_type == "DELETED":
            out = "DELETED" if was else None
        elif ev_type == "ADDED":
            out = "ADDED" if now else None
        else:
            out = {(True, True): "MODIFIED", (False, True): "ADDED",
                   (True, False): "DELETED"}.get((was, now))
        if out is None:
            return
        with self._cond:
            if self._closed:
                return
            if len(self._queue) >= WATCH_QUEUE_LIMIT:
                self._closed = True
            else:
                self._queue.append((out, new))
            self._cond.notify_all()

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next event, or None on timeout or once closed and drained."""
        with self._cond:
            if not self._queue and not self._closed:
                self._cond.wait_for(lambda: self._queue or self._closed, timeout)
            if not self._queue:
                return None
            ev_type, obj = self._queue.popleft()
        return {"type": ev_type, "object": copy_tree(obj)}

    def close(self) -> None:
        self._unregister(self)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            ev = self.next(None)
            if ev is None:
                return
            yield ev

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
