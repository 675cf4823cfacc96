"""The lab's object store: every Kubernetes object of the lab, in memory.

Invariants (the API server and the in-process controllers rely on them):

- One global, strictly growing ``resourceVersion`` (an int, rendered as a string).  Every
  committed write takes the next value; a write that changes nothing is a no-op (no new
  resourceVersion, no event) — as in Kubernetes, and so controllers that re-write the same
  status do not wake themselves up forever.
- Stored dicts are never mutated in place: a write replaces the dict.  That lets watch queues
  and the bounded history hold references; everything handed out is a deep copy.
- ``metadata.generation`` (kinds with ``Kind.generation``) starts at 1 and grows by one when
  anything outside ``metadata``/``status`` changes.
- Kinds with a status subresource: writes to the main resource keep the stored ``status``;
  writes to ``subresource="status"`` change only ``status``.  Create resets ``status`` to ``{}``
  (a Namespace starts ``Active``, a Pod ``Pending``) — so a controller creating a Pod must set its
  status afterwards through the status subresource, as a kubelet does.
- One RLock guards everything.  Subscribers are called after the lock is released, in the
  writing thread, with their own copy; a subscriber may call back into the store.
- Deleting an object deletes its dependents (``ownerReferences`` by uid, recursively), and
  deleting a Namespace deletes what is in it — immediately, no finalizers.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from rotate_lab.cluster.api import resources
from rotate_lab.cluster.api.apierrors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    expired,
    method_not_allowed,
    not_found,
)
from rotate_lab.cluster.api.jsontree import copy_tree
from rotate_lab.cluster.api.patch import PatchError, apply_patch
from rotate_lab.cluster.api.resources import Kind
from rotate_lab.cluster.api.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from rotate_lab.cluster.api.validation import apply_defaults, validate
from rotate_lab.cluster.api.watch import Watch

T = TypeVar("T")

__all__ = ["ApiError", "Store", "now_rfc3339"]

Obj = dict[str, Any]
Subscriber = Callable[[str, str, Obj], None]
#: (resourceVersion, event type, kind name, object before, object after)
_Event = tuple[int, str, str, Obj | None, Obj]
#: changes made under the lock, handed to subscribers once it is released
_Notes = list[tuple[str, str, Obj]]
_Objs = list[Obj]
_Names = list[tuple[str, str]]  # (namespace, name); "" for a cluster-scoped kind

log = logging.getLogger("rotate_lab.store")

HISTORY = 10_000  # events kept for watch replay; older resourceVersions get 410 Expired
MAX_EVENTS = 2_000  # a watcher this far behind is closed (clients re-list)
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kind(kind: str) -> Kind:
    try:
        return resources.lookup(kind)
    except KeyError:
        raise ApiError(404, "NotFound", f"the server doesn't have a resource type {kind!r}"
                       ) from None


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _same_ignoring_rv(a: Obj, b: Obj) -> bool:
    ma, mb = dict(a.get("metadata") or {}), dict(b.get("metadata") or {})
    ma.pop("resourceVersion", None)
    mb.pop("resourceVersion", None)
    return ma == mb and {k: v for k, v in a.items() if k != "metadata"} == {
        k: v for k, v in b.items() if k != "metadata"}


class Store:
    def __init__(self, *, require_namespaces: bool = True) -> None:
        self._lock = threading.RLock()
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {
            k.kind: {} for k in resources.KINDS if not k.virtual}
        self._rv = 0
        self._history: deque[_Event] = deque(maxlen=HISTORY)
        self._floor = 0  # events with rv <= floor were evicted from history
        self._watches: set[Watch] = set()
        self._subscribers: list[Subscriber] = []
        self._require_namespaces = require_namespaces
        for ns in DEFAULT_NAMESPACES:
            self.create("Namespace", {"metadata": {"name": ns}})

    # --- reads --------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._rv)

    def bookmark_version(self, watch: Watch) -> str | None:
        """The resourceVersion a BOOKMARK on ``watch`` may carry now, or None while events
        are still queued for it.  A bookmark promises its watcher every event up to that
        version (a client resumes from it): commits offer their events under this lock, so
        an empty queue under it means every event up to the current version was handed out.
        Reading the version apart from the queue lost an event committed in between (its
        rv ≤ the bookmark's) whenever the watch then ended: a waiter resuming from the
        bookmark never saw it."""
        with self._lock:
            return None if watch.pending else str(self._rv)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj:
        k = _kind(kind)
        with self._lock:
            return copy_tree(self._stored(k, namespace, name))

    def inspect(self, kind: str, namespace: str | None, name: str,
                fn: Callable[[Obj], T]) -> T:
        """``fn`` of the stored object, called under the lock without copying it: ``fn`` only
        reads, and returns nothing that refers into the object.  For a read of a large object
        (a Role of 700 rules, on every request's authorization) where a copy cost more than
        the answer."""
        k = _kind(kind)
        with self._lock:
            return fn(self._stored(k, namespace, name))

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[_Objs, str]:
        k = _kind(kind)
        labels, fields = _selectors(label_selector, field_selector)
        with self._lock:
            items = self._matching(k, namespace, lambda o: labels.matches(
                (o.get("metadata") or {}).get("labels")) and fields.matches(o))
            return copy_tree(items), str(self._rv)

    def names(self, kind: str) -> _Names:
        """(namespace, name) of every stored object of ``kind``, in :meth:`list`'s order, and
        nothing copied: what a controller's periodic resync needs to re-queue them.  Listing
        (copying every object of its kinds every 30 s, for their keys alone) made the resyncs
        one of the largest costs of an idle 100-consumer lab."""
        with self._lock:
            return sorted(self._table(_kind(kind)))

    def select(self, kind: str, namespace: str | None,
               where: Callable[[Obj], bool]) -> _Objs:
        """Copies of the objects of ``kind`` in ``namespace`` (None: every namespace) for which
        ``where`` holds, in :meth:`list`'s order.  For the lab's own controllers: ``where``
        reads the stored objects under the lock and must not change them; only the matches
        are copied: a controller that copied every pod of a namespace on each reconcile to
        keep its own would, at 100 consumers, spend most of the API server's CPU during a
        rollout, and the rollouts would queue behind it."""
        k = _kind(kind)
        with self._lock:
            return copy_tree(self._matching(k, namespace, where))

    # --- writes -------------------------------------------------------------------------

    def create(self, kind: str, obj: Obj) -> Obj:
        k = _kind(kind)
        notes: _Notes = []
        with self._lock:
            out = self._create(k, obj, notes)
        self._notify(notes)
        return out

    def update(self, kind: str, obj: Obj, *, subresource: str | None = None) -> Obj:
        k = _kind(kind)
        md = obj.get("metadata") or {}
        ns = self._ns(k, md.get("namespace"))
        name = str(md.get("name") or "")
        notes: _Notes = []
        with self._lock:
            old = self._stored(k, ns, name)
            rv = md.get("resourceVersion")
            if rv not in (None, "") and str(rv) != old["metadata"]["resourceVersion"]:
                raise conflict(k, name)
            out = self._replace(k, old, copy_tree(obj), subresource, notes)
        self._notify(notes)
        return out

    def patch(self, kind: str, namespace: str | None, name: str, patch: Any, patch_type: str, *,
              subresource: str | None = None) -> Obj:
        k = _kind(kind)
        notes: _Notes = []
        with self._lock:
            old = self._stored(k, namespace, name)
            try:
                patched = apply_patch(old, patch, patch_type)
            except PatchError as exc:
                if exc.invalid:
                    raise ApiError(422, "Invalid", f"the patch does not apply: {exc}") from None
                raise bad_request(f"invalid patch: {exc}") from None
            if not isinstance(patched, dict):
                raise bad_request("the patch must produce an object")
            rv = (patched.get("metadata") or {}).get("resourceVersion")
            if rv not in (None, "") and str(rv) != old["metadata"]["resourceVersion"]:
                raise conflict(k, name)
            out = self._replace(k, old, patched, subresource, notes)
        self._notify(notes)
        return out

    def mutate(self, kind: str, namespace: str | None, name: str, fn: Callable[[Obj], None], *,
               subresource: str | None = None) -> Obj:
        """Atomic read-modify-write: ``fn`` edits a private copy in place, under the store lock
        (so it must be quick, must not call the store, and must not keep a reference to the
        copy, which becomes the stored object).  No conflict is possible."""
        k = _kind(kind)
        notes: _Notes = []
        with self._lock:
            old = self._stored(k, namespace, name)
            work = copy_tree(old)
            fn(work)
            out = self._replace(k, old, work, subresource, notes)
        self._notify(notes)
        return out

    def delete(self, kind: str, namespace: str | None, name: str, *,
               propagation: str = "Background", grace_seconds: int | None = None) -> Obj:
        """Remove the object, or — a Pod given ``grace_seconds > 0`` — start its graceful
        deletion as the API server does: ``deletionTimestamp`` and
        ``deletionGracePeriodSeconds`` set, the object kept (``Terminating``) until the
        kubelet has stopped its processes and deletes it for good."""
        k = _kind(kind)
        notes: _Notes = []
        with self._lock:
            old = self._stored(k, namespace, name)
            if k.kind == "Pod" and grace_seconds and grace_seconds > 0:
                if old["metadata"].get("deletionTimestamp"):
                    return copy_tree(old)
                marked = copy_tree(old)
                self._rv += 1
                marked["metadata"].update(deletionTimestamp=now_rfc3339(),
                                          deletionGracePeriodSeconds=grace_seconds,
                                          resourceVersion=str(self._rv))
                self._commit(k, "MODIFIED", old, marked, notes)
                self._notify(notes)
                return copy_tree(marked)
            out = self._delete(k, self._ns(k, namespace), name, propagation != "Orphan", notes)
        self._notify(notes)
        return out

    # --- watches and subscribers ------------------------------------------------------------

    def watch(self, kind: str, namespace: str | None = None, *,
              resource_version: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None) -> Watch:
        """Events after ``resource_version``; None/""/"0": ADDED for every current object first.

        Raises 410 Expired when events after ``resource_version`` are no longer in history.
        """
        k = _kind(kind)
        labels, fields = _selectors(label_selector, field_selector)
        w = Watch(self._unregister, k, namespace if k.namespaced else None, labels, fields)
        with self._lock:
            if resource_version in (None, "", "0"):
                for _, obj in sorted(self._table(k).items()):
                    w._offer("ADDED", None, obj)
            else:
                try:
                    since = int(str(resource_version))
                except ValueError:
                    raise bad_request(
                        f"invalid resource version {resource_version!r}") from None
                if since < self._floor:
                    raise expired(f"too old resource version: {since} ({self._floor + 1})")
                for rv, ev_type, kname, old, new in self._history:
                    if rv > since and kname == k.kind:
                        w._offer(ev_type, old, new)
            self._watches.add(w)
        return w

    def subscribe(self, fn: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(fn)

    def _unregister(self, w: Watch) -> None:
        with self._lock:
            self._watches.discard(w)

    # --- seeding and events -----------------------------------------------------------------

    def load_manifests(self, docs: _Objs) -> _Objs:
        """Create (or replace, if present) every object; Namespaces first, ``kind: List``
        unpacked, namespaced objects without a namespace go to ``default``."""
        flat: _Objs = []
        for doc in docs:
            if not doc:
                continue
            if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                flat.extend(d for d in doc["items"] if d)
            else:
                flat.append(doc)
        flat.sort(key=lambda d: 0 if d.get("kind") == "Namespace" else 1)
        out = []
        for doc in flat:
            kind = str(doc.get("kind", ""))
            try:
                out.append(self.create(kind, doc))
            except ApiError as exc:
                if exc.reason != "AlreadyExists":
                    raise
                md = doc.get("metadata") or {}
                current = self.get(kind, md.get("namespace") or "default", md["name"])
                body = copy_tree(doc)
                body["metadata"] = {**current["metadata"], **md}
                out.append(self.update(kind, body))
        return out

    def record_event(self, involved: Obj, reason: str, message: str,
                     type: str = "Normal") -> Obj | None:
        """A core/v1 Event about ``involved``; repeats of the same reason+message bump
        ``count``.  Never raises: an event that cannot be recorded is dropped, as client-go's
        recorder does.  Messages must not carry secret values."""
        md = involved.get("metadata") or {}
        ns = md.get("namespace") or "default"
        ref = {"kind": involved.get("kind"), "apiVersion": involved.get("apiVersion"),
               "namespace": md.get("namespace"), "name": md.get("name"), "uid": md.get("uid"),
               "resourceVersion": md.get("resourceVersion")}
        ts = now_rfc3339()
        try:
            with self._lock:
                repeat = next((ev["metadata"]["name"] for ev in self._objects["Event"].values()
                               if ev.get("involvedObject", {}).get("uid") == ref["uid"]
                               and ev.get("reason") == reason and ev.get("message") == message),
                              None)
            if repeat is not None:
                return self.mutate("Event", ns, repeat, lambda e: e.update(
                    count=int(e.get("count") or 1) + 1, lastTimestamp=ts))
            self._trim_events()
            name = f"{md.get('name')}.{uuid.uuid4().hex[:16]}"
            return self.create("Event", {
                "metadata": {"name": name, "namespace": ns}, "involvedObject": ref,
                "reason": reason, "message": message, "type": type, "count": 1,
                "firstTimestamp": ts, "lastTimestamp": ts, "source": {"component": "lab"},
                "reportingComponent": "lab", "reportingInstance": "lab"})
        except ApiError:
            return None

    def _trim_events(self) -> None:
        """Keep at most MAX_EVENTS Events (oldest go first): a long-lived lab must not grow
        without bound, and real clusters expire events too (after an hour)."""
        with self._lock:
            events = self._objects["Event"]
            excess = len(events) - MAX_EVENTS + 1
            if excess <= 0:
                return
            oldest = sorted(events.items(),
                            key=lambda kv: int(kv[1]["metadata"]["resourceVersion"]))[:excess]
        for (ns, name), _ in oldest:
            with contextlib.suppress(ApiError):
                self.delete("Event", ns, name)

    # --- internals (call with the lock held) --------------------------------------------------

    def _table(self, k: Kind) -> dict[tuple[str, str], Obj]:
        if k.virtual:
            raise method_not_allowed()
        return self._objects[k.kind]

    @staticmethod
    def _ns(k: Kind, namespace: str | None) -> str:
        return (namespace or "default") if k.namespaced else ""

    def _matching(self, k: Kind, namespace: str | None, where: Callable[[Obj], bool]) -> _Objs:
        """The stored objects (not copies) of ``k`` in ``namespace`` (None: all) for which
        ``where`` holds, by (namespace, name): the one order of list and select."""
        return [o for (ns, _), o in sorted(self._table(k).items())
                if (namespace is None or not k.namespaced or ns == namespace) and where(o)]

    def _stored(self, k: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._table(k).get((self._ns(k, namespace), name))
        if obj is None:
            raise not_found(k, name)
        return obj

    def _commit(self, k: Kind, ev_type: str, old: Obj | None, new: Obj,
                notes: _Notes) -> None:
        md = new["metadata"]
        key = (self._ns(k, md.get("namespace")), md["name"])
        if ev_type == "DELETED":
            del self._objects[k.kind][key]
        else:
            self._objects[k.kind][key] = new
        if len(self._history) == self._history.maxlen:
            self._floor = self._history[0][0]
        self._history.append((self._rv, ev_type, k.kind, old, new))
        for w in list(self._watches):
            if w.kind is k:
                w._offer(ev_type, old, new)
        notes.append((ev_type, k.kind, new))

    def _create(self, k: Kind, obj: Obj, notes: _Notes) -> Obj:
        table = self._table(k)
        new = copy_tree(obj)
        md = new.get("metadata")
        if not isinstance(md, dict):
            md = new["metadata"] = {}
        if k.namespaced:
            md["namespace"] = md.get("namespace") or "default"
            if (self._require_namespaces
                    and ("", md["namespace"]) not in self._objects["Namespace"]):
                raise not_found(_kind("Namespace"), md["namespace"])
        else:
            md.pop("namespace", None)
        if not md.get("name") and md.get("generateName"):
            while True:
                md["name"] = md["generateName"] + "".join(random.choices(_GEN_CHARS, k=5))
                if (self._ns(k, md.get("namespace")), md["name"]) not in table:
                    break
        new["apiVersion"], new["kind"] = k.api_version, k.kind
        if k.status:
            new["status"] = {"Namespace": {"phase": "Active"}, "Pod": {"phase": "Pending"}}.get(
                k.kind, {})
        apply_defaults(k, new)
        validate(k, new)
        if (self._ns(k, md.get("namespace")), md["name"]) in table:
            raise already_exists(k, md["name"])
        for f in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            md.pop(f, None)
        self._rv += 1
        md.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(),
                  resourceVersion=str(self._rv))
        if k.generation:
            md["generation"] = 1
        else:
            md.pop("generation", None)
        self._commit(k, "ADDED", None, new, notes)
        return copy_tree(new)

    def _replace(self, k: Kind, old: Obj, new: Obj, subresource: str | None,
                 notes: _Notes) -> Obj:
        if subresource == "status":
            if not k.status:
                raise not_found(k, old["metadata"]["name"])
            result = copy_tree(old)
            if new.get("status") is None:
                result.pop("status", None)
            else:
                result["status"] = new["status"]
        elif subresource is None:
            result = new
            if k.status:
                result.pop("status", None)
                if "status" in old:
                    result["status"] = copy_tree(old["status"])
            md = result.get("metadata")
            if not isinstance(md, dict):
                md = result["metadata"] = {}
            for f in ("uid", "creationTimestamp", "name", "namespace", "generation",
                      "deletionTimestamp"):
                if f in old["metadata"]:
                    md[f] = old["metadata"][f]
                else:
                    md.pop(f, None)
        else:
            raise not_found(k, old["metadata"]["name"])
        result["apiVersion"], result["kind"] = k.api_version, k.kind
        result["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        apply_defaults(k, result)
        if k.generation and _spec_part(result) != _spec_part(old):
            result["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        if _same_ignoring_rv(result, old):
            return copy_tree(old)
        validate(k, result)
        self._rv += 1
        result["metadata"]["resourceVersion"] = str(self._rv)
        self._commit(k, "MODIFIED", old, result, notes)
        return copy_tree(result)

    def _delete(self, k: Kind, ns: str, name: str, cascade: bool,
                notes: _Notes) -> Obj:
        old = self._objects[k.kind].get((ns, name))
        if old is None:  # already gone through another owner
            return {}
        gone = copy_tree(old)
        self._rv += 1
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._commit(k, "DELETED", old, gone, notes)
        if cascade:
            uid = old["metadata"].get("uid")
            for dk in resources.KINDS:
                if dk.virtual:
                    continue
                for (dns, dname), obj in list(self._objects[dk.kind].items()):
                    owners = obj["metadata"].get("ownerReferences") or []
                    in_ns = k.kind == "Namespace" and dk.namespaced and dns == name
                    if in_ns or any(o.get("uid") == uid for o in owners):
                        self._delete(dk, dns, dname, True, notes)
        return copy_tree(gone)

    def _notify(self, notes: _Notes) -> None:
        """Each committed change, to every subscriber: one copy of the object per change,
        shared by them all — a subscriber reads it to pick what to reconcile and never
        changes it (``Controller.keys_for``).  A copy each, for a dozen controllers most of
        which ignore the kind, made every pod status update a dozen copies."""
        if not notes:
            return
        with self._lock:
            subscribers = list(self._subscribers)
        for ev_type, kind, obj in notes:
            shared = copy_tree(obj)
            for fn in subscribers:
                try:
                    fn(ev_type, kind, shared)
                except Exception:  # the write is committed; a subscriber bug must not undo
                    log.exception("store subscriber failed on %s %s", ev_type, kind)


def _selectors(label_selector: str | None,
               field_selector: str | None) -> tuple[LabelSelector, FieldSelector]:
    try:
        return parse_label_selector(label_selector), parse_field_selector(field_selector)
    except SelectorError as exc:
        raise bad_request(str(exc)) from None
