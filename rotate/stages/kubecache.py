"""A run's shared, watched copy of one kind's objects in one namespace (an "informer").

Why: every prepared ``consumer.restart`` waits for its new pods to start, up to
``maxParallel`` at once.  Were each waiter to watch all the namespace's Pods and, on every
event, re-GET its Deployment and re-LIST the pods, each pod event of any consumer would cost
N GETs and N LISTs: O(N²) requests in the number of consumers.  An :class:`ObjectCache` lists
the namespace's objects once, follows one watch from the list's resourceVersion, and every
waiter reads the copy in memory; a waiter's :class:`CacheReader` is the ``pause`` of
:func:`rotate.core.waiting.wait_for` and returns as soon as the copy changed since that
waiter last read it (a version counter under one Condition).

Correctness rules (client-go's reflector, thinned to what the waits need):

* The watch starts at the list's own resourceVersion (``Kube.list_versioned``), not at the
  newest object's: when every object is older than the server's watch history, a watch
  from the newest one is refused (410) at every re-list.
* Events are applied by one thread in the order the watch delivers them: ADDED and MODIFIED
  store the object as sent, DELETED removes it, BOOKMARK only moves the resourceVersion.
* A watch that ends normally (the server's timeout) is resumed from the last
  resourceVersion seen: no change is missed or applied twice.
* A watch ERROR event (410 Expired: the version left the server's history) or a ClientError
  from the watch re-lists the copy after :data:`_RELIST_PAUSE` (a server refusing costs one
  request a second, as ``kubewatch._REWATCH_PAUSE``); meanwhile readers keep the copy as it
  was (late, not wrong).  Every (re)list replaces the whole copy.
* A failed list marks the copy *not synced* until a re-list succeeds; so does the time
  before the first list.  Then :meth:`ObjectCache.objects` raises: the list's own error (the
  same error the waiter's own LIST raised before; wait_for treats a TemporaryError as "not
  yet" and ends on a permanent one), or a TemporaryError saying the list is under way.
* Every change of what readers may see (an event applied, a list, a failed list) bumps the
  version and wakes every reader.
* A reader sees a state the server had (a little late, at worst): so the cache can make a
  wait slower, never wrong.  The objects handed out are shared: read-only.
* The thread only speeds waiting up: if it dies of a bug (reported by threading.excepthook),
  readers list the server themselves at each read, and their pause is wait_for's back-off.
* :meth:`ObjectCache.close` wakes every reader and stops the thread — at once when it is
  between watches, else at its next event or the watch's server timeout (daemon thread).

Lifetime: :class:`KubeCaches` makes a cache on first use per (kind, namespace) and is owned
by the run (rotate.engine.kinds.base.Run), which closes it when the run ends.  Only kinds
the run may list and watch in that namespace (rotate.engine.access) are cached: Pods.  Not
Deployments: rotate's grants on workloads name each one (RBAC resourceNames), and a list or
watch of them all would widen ``rotate rbac``; a workload wait watches its own object
(rotate.stages.kubewatch) and reads it once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from rotate.clients.seams import Kube, WatchEvent
from rotate.core.errors import ClientError, TemporaryError

#: After a failed list or watch (or a watch the server closed at once, without an event),
#: wait this long before listing or watching again.
_RELIST_PAUSE = 1.0

Obj = Mapping[str, Any]


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _labels(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


class ObjectCache:
    """Every object of ``kind`` in ``namespace``, kept current by one list + watch thread."""

    def __init__(self, kube: Kube, kind: str, namespace: str, *,
                 server_timeout: float = 10) -> None:
        self._kube = kube
        self._kind = kind
        self._namespace = namespace
        self._server_timeout = server_timeout
        self._cond = threading.Condition()
        self._objects: dict[str, Obj] = {}
        self._synced = False
        self._error: ClientError | None = None
        self._version = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True,
                                        name=f"cache-{kind}-{namespace}")
        self._thread.start()

    @property
    def what(self) -> str:
        return f"{self._kind.lower()}s of namespace {self._namespace}"

    @property
    def version(self) -> int:
        with self._cond:
            return self._version

    # ------------------------------------------------------------------ readers

    def objects(self, labels: Mapping[str, str] | None = None) -> list[Obj]:
        """The objects whose labels include ``labels`` (all when None); raises while the copy
        is not synced (module doc)."""
        wanted = dict(labels or {}).items()
        with self._cond:
            if self._thread.is_alive() or self._stop.is_set():
                if not self._synced:
                    if self._error is not None:  # raised again at each read: a fresh traceback
                        raise self._error.with_traceback(None)
                    raise TemporaryError("kubernetes", f"list {self.what}", "being listed")
                return [o for o in self._objects.values() if wanted <= _labels(o).items()]
        # the thread died of a bug (threading.excepthook reported it): the copy is no longer
        # kept, so read the server, as a waiter did before the copy existed
        items, _ = self._kube.list_versioned(self._kind, self._namespace)
        return [o for o in items if wanted <= _labels(o).items()]

    def wait_newer(self, seen: int, seconds: float) -> None:
        """Return when the version passed ``seen``, the cache closed, or after ``seconds``."""
        with self._cond:
            self._cond.wait_for(lambda: self._version > seen or self._stop.is_set(),
                                timeout=max(0.0, seconds))

    def reader(self) -> CacheReader:
        return CacheReader(self)

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # ------------------------------------------------------------------ the one writer

    def _changed(self) -> None:
        """Under the lock: readers may see something new."""
        self._version += 1
        self._cond.notify_all()

    def _follow(self) -> None:
        while not self._stop.is_set():
            rv = self._list()
            while rv is not None and not self._stop.is_set():
                began = time.monotonic()
                rv, quiet = self._watch(rv)
                if rv is not None and quiet and time.monotonic() - began < _RELIST_PAUSE:
                    self._stop.wait(_RELIST_PAUSE)  # closed at once: not a busy loop
            if not self._stop.is_set():
                self._stop.wait(_RELIST_PAUSE)

    def _list(self) -> str | None:
        """Replace the copy by a fresh list; its resourceVersion, or None when it failed."""
        try:
            items, rv = self._kube.list_versioned(self._kind, self._namespace)
        except ClientError as exc:
            self._fail(exc)
            return None
        with self._cond:
            self._objects = {_name(o): o for o in items}
            self._synced, self._error = True, None
            self._changed()
        return rv

    def _fail(self, exc: ClientError) -> None:
        with self._cond:
            self._synced, self._error = False, exc
            self._changed()

    def _watch(self, rv: str) -> tuple[str | None, bool]:
        """Apply the events after ``rv`` until the stream ends: (the version to resume from,
        or None to re-list; whether the stream carried no event)."""
        quiet = True
        try:
            for event in self._kube.watch(self._kind, self._namespace, resource_version=rv,
                                          timeout_seconds=self._server_timeout):
                if self._stop.is_set():
                    return None, quiet
                if event.type == "ERROR":  # 410 Expired, or the server gave up: re-list
                    break
                quiet = False
                rv = self._apply(event) or rv
            else:
                return rv, quiet
        except ClientError:
            pass
        return None, quiet  # the re-list bumps the version

    def _apply(self, event: WatchEvent) -> str:
        obj = event.object
        with self._cond:
            if event.type == "DELETED":
                self._objects.pop(_name(obj), None)
                self._changed()
            elif event.type in ("ADDED", "MODIFIED"):
                self._objects[_name(obj)] = obj
                self._changed()
        return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class CacheReader:
    """One waiter's view of a cache: :meth:`objects` to read, itself as wait_for's ``pause``
    (returns once the cache changed since this reader last read it)."""

    def __init__(self, cache: ObjectCache) -> None:
        self._cache = cache
        self._seen = -1

    def objects(self, labels: Mapping[str, str] | None = None) -> list[Obj]:
        # the version before the read: a change racing the read only wakes the pause early
        self._seen = self._cache.version
        return self._cache.objects(labels)

    def __call__(self, seconds: float) -> None:
        self._cache.wait_newer(self._seen, seconds)


class KubeCaches:
    """The run's caches, one per (kind, namespace), each made on first use (thread-safe)."""

    def __init__(self, kube: Kube, *, server_timeout: float = 10) -> None:
        self._kube = kube
        self._server_timeout = server_timeout
        self._lock = threading.Lock()
        self._caches: dict[tuple[str, str], ObjectCache] = {}
        self._closed = False

    def of(self, kind: str, namespace: str) -> ObjectCache:
        with self._lock:
            if self._closed:
                raise RuntimeError("the run's caches are closed")
            key = (kind, namespace)
            if key not in self._caches:
                self._caches[key] = ObjectCache(self._kube, kind, namespace,
                                                server_timeout=self._server_timeout)
            return self._caches[key]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            caches, self._caches = list(self._caches.values()), {}
        for cache in caches:
            cache.close()
