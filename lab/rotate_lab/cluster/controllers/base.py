"""The reconcile loop every lab controller shares.

A controller names the kinds it watches, maps each store change to the keys it must
reconcile (:meth:`Controller.keys_for`) and reconciles one key at a time
(:meth:`Controller.reconcile`).  The base class owns the rest:

- a *deduplicating delayed work queue*: a key queued twice is reconciled once, at the
  earliest of the requested times — so a burst of events costs one reconcile, as with
  client-go's workqueue;
- one worker thread, so a controller never reconciles two keys at once and needs no locks
  of its own around its bookkeeping;
- a periodic resync that re-queues every object of ``kinds`` (``resync_period`` seconds),
  which heals anything a missed or failed reconcile left behind;
- error handling: an exception in ``reconcile`` is logged and the key retried with
  back-off, so one bad object never stops the loop.

Invariants a subclass relies on: ``reconcile`` reads the current state from the store (never
from the event that queued it), is idempotent, and writes only when something changed —
otherwise its own writes would queue it again forever.  ``reconcile`` returns the number of
seconds after which it wants to run again for that key (timeouts, minReadySeconds), or None.

Subscriptions: the store calls :meth:`_on_change` after every change, outside its lock.  The
store has no unsubscribe, so a stopped controller simply ignores further calls.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rotate_lab.cluster.context import LabContext

#: (kind, namespace, name); namespace is "" for cluster-scoped objects.
Key = tuple[str, str, str]

_MAX_BACKOFF = 5.0


def key_of(kind: str, obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == (owner.get("metadata") or {}).get("uid")


class Controller:
    """Subclass, set ``kinds``, override ``reconcile`` (and ``keys_for`` when the key of a
    change is not simply the changed object), then ``start()``; ``stop()`` or ``ctx.stop``
    ends the worker."""

    name: str = "controller"
    kinds: tuple[str, ...] = ()
    resync_period: float = 30.0

    def __init__(self, ctx: LabContext) -> None:
        self.ctx = ctx
        self.log = logging.getLogger(f"rotate_lab.{self.name}")
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Key]] = []
        self._due: dict[Key, float] = {}
        self._seq = 0
        self._failures: dict[Key, int] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what subclasses provide --------------------------------------------------------

    def keys_for(self, event_type: str, kind: str, obj: dict[str, Any]) -> list[Key]:
        """Keys to reconcile after ``event_type`` (ADDED/MODIFIED/DELETED) on ``obj``."""
        return [key_of(kind, obj)] if kind in self.kinds else []

    def owned(self, kind: str, owner: dict[str, Any]) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``owner``'s namespace that ``owner`` controls, in the
        store's list order.  Picked under the store's lock and only they are copied: a
        controller that listed the namespace to find its own copied every Pod of it on each
        reconcile, which at 100 consumers was most of the lab API server's CPU."""
        return self.ctx.store.select(kind, owner["metadata"]["namespace"],
                                     lambda obj: owned_by(obj, owner))

    def reconcile(self, key: Key) -> float | None:
        raise NotImplementedError

    def resync_keys(self) -> list[Key]:
        """Every key a periodic resync re-queues: by default all objects of ``kinds``."""
        return [key for kind in self.kinds for key in self.stored_keys(kind)]

    def stored_keys(self, kind: str) -> list[Key]:
        """The key of every stored object of ``kind``, read without copying any object."""
        return [(kind, ns, name) for ns, name in self.ctx.store.names(kind)]

    def on_stop(self) -> None:
        """Release what the controller holds (sockets, processes); called once."""

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        self.ctx.store.subscribe(self._on_change)
        for key in self.resync_keys():
            self.enqueue(key)
        self._thread = threading.Thread(target=self._run, name=f"lab-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self.on_stop()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set() or self.ctx.stop.is_set()

    def enqueue(self, key: Key, delay: float = 0.0) -> None:
        at = time.monotonic() + max(0.0, delay)
        with self._cond:
            current = self._due.get(key)
            if current is not None and current <= at:
                return
            self._due[key] = at
            self._seq += 1
            heapq.heappush(self._heap, (at, self._seq, key))
            self._cond.notify()

    # -- internals -----------------------------------------------------------------------

    def _on_change(self, event_type: str, kind: str, obj: dict[str, Any]) -> None:
        if self.stopped or kind not in self.kinds:
            return
        try:
            keys = self.keys_for(event_type, kind, obj)
        except Exception:  # a mapping bug must not break the store's notifier
            self.log.exception("%s: keys_for failed", self.name)
            return
        for key in keys:
            self.enqueue(key)

    def _next_key(self, resync_at: float) -> Key | None:
        """Block until a key is due (return it) or the resync time or stop comes (None)."""
        with self._cond:
            while not self.stopped:
                now = time.monotonic()
                while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                    heapq.heappop(self._heap)  # superseded by an earlier request
                if self._heap and self._heap[0][0] <= now:
                    _, _, key = heapq.heappop(self._heap)
                    del self._due[key]
                    return key
                if now >= resync_at:
                    return None
                until = min(resync_at, self._heap[0][0] if self._heap else resync_at)
                # Bounded wait so that ctx.stop (which cannot notify us) is seen promptly.
                self._cond.wait(timeout=min(0.5, max(0.0, until - now)))
        return None

    def _run(self) -> None:
        resync_at = time.monotonic() + self.resync_period
        while not self.stopped:
            key = self._next_key(resync_at)
            if self.stopped:
                break
            if key is None:
                resync_at = time.monotonic() + self.resync_period
                try:
                    for k in self.resync_keys():
                        self.enqueue(k)
                except Exception:
                    self.log.exception("%s: resync failed", self.name)
                continue
            self._process(key)
        if not self._stopped.is_set():  # ended by ctx.stop: release resources too
            self._stopped.set()
            self.on_stop()

    def _process(self, key: Key) -> None:
        try:
            again = self.reconcile(key)
        except Exception as exc:
            n = self._failures.get(key, 0) + 1
            self._failures[key] = n
            delay = min(_MAX_BACKOFF, 0.05 * (2 ** min(n, 10)))
            if getattr(exc, "code", None) == 409:  # stale read: just retry soon
                self.log.debug("%s: conflict on %s, retrying", self.name, key)
            else:
                self.log.exception("%s: reconcile %s failed (retry in %.2fs)", self.name, key,
                                   delay)
            self.enqueue(key, delay)
            return
        self._failures.pop(key, None)
        if again is not None:
            self.enqueue(key, again)


class OwnerController(Controller):
    """A controller of ``kinds[0]`` objects that also wakes on their children (``kinds[1:]``).

    A child's event re-queues the owner its controller ``ownerReference`` names — how a
    Deployment hears of its ReplicaSets and a ReplicaSet, StatefulSet or DaemonSet of its
    pods; a periodic resync re-queues every owner (children alone are never keys).
    """

    def keys_for(self, event_type: str, kind: str, obj: dict[str, Any]) -> list[Key]:
        owner = self.kinds[0]
        if kind == owner:
            return [key_of(kind, obj)]
        ref = controller_ref(obj)
        if ref is not None and ref.get("kind") == owner:
            return [(owner, str(obj["metadata"].get("namespace") or ""), str(ref.get("name")))]
        return []

    def resync_keys(self) -> list[Key]:
        return self.stored_keys(self.kinds[0])
