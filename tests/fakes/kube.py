"""A fake of the Kube seam: objects with a global resourceVersion, generation bumps on spec
changes, watches, and synchronous "controllers" (plain callables run after every mutation),
so an ESO sync or a rollout happens deterministically, without sleeps."""

from __future__ import annotations

import base64
import builtins
import copy
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from rotate.clients.seams import (
    Endpoint,
    KubeEvent,
    PatchType,
    WatchEvent,
)
from rotate.core.errors import ConflictError, NotFoundError, RejectedError
from rotate.core.secret import Secret
from tests.fakes.faults import Faults

# --------------------------------------------------------------------------- Kubernetes

Key = tuple[str, str, str]  # kind, namespace, name


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


Controller = Callable[["FakeKube", str, str, str], None]


class FakeKube:
    def __init__(self) -> None:
        self._lock = threading.Condition(threading.RLock())
        self.objects: dict[Key, dict[str, Any]] = {}
        self._rv = itertools.count(100)
        self.events: list[tuple[int, str, Key, dict[str, Any]]] = []
        self.controllers: list[Controller] = []
        self.denied: set[tuple[str, str, str | None]] = set()
        self.faults = Faults()
        self.patches: list[tuple[str, str, str, Any]] = []
        self.deleted: list[Key] = []
        self._closed = False
        self.watches_started = 0
        self.kube_events: list[KubeEvent] = []  # create_event, in order
        self.pod_logs: dict[tuple[str, str], str] = {}  # pod_log_tail's source
        self.forwards: list[tuple[str, str, int]] = []  # port_forward calls, in order
        self.forwards_closed = 0  # close_forwards calls
        #: called with the kind before each list: a test's "the cluster moved meanwhile"
        self.before_list: list[Callable[[str], None]] = []

    @property
    def server(self) -> str:
        return "https://127.0.0.1:6443"

    # ---------------------------------------------------------------- internals

    def _bump(self, key: Key, obj: dict[str, Any], event: str) -> dict[str, Any]:
        rv = next(self._rv)
        obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
        self.events.append((rv, event, key, self._public(obj)))  # a watch never sees data
        self._lock.notify_all()
        return obj

    def _get(self, key: Key) -> dict[str, Any]:
        if key not in self.objects:
            raise NotFoundError("kubernetes", f"get {key[0].lower()}/{key[1]}/{key[2]}",
                                "not found", status=404)
        return self.objects[key]

    def _run_controllers(self, kind: str, ns: str, name: str) -> None:
        for c in list(self.controllers):
            c(self, kind, ns, name)

    @staticmethod
    def _public(obj: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        if out.get("kind") == "Secret":
            out.pop("data", None)
        return out

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Test setup: store an object as is (kind/metadata required), no controllers."""
        with self._lock:
            meta = obj.setdefault("metadata", {})
            key = (obj["kind"], meta.get("namespace", ""), meta["name"])
            meta.setdefault("generation", 1)
            meta.setdefault("uid", f"uid-{key[2]}")
            self.objects[key] = obj
            return self._bump(key, obj, "ADDED")

    def set_status(self, kind: str, ns: str, name: str, status: dict[str, Any]) -> None:
        """What a controller does: replace .status (no generation change)."""
        with self._lock:
            obj = self._get((kind, ns, name))
            obj["status"] = status
            self._bump((kind, ns, name), obj, "MODIFIED")

    def raw(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        return self.objects[(kind, ns, name)]

    # ---------------------------------------------------------------- Kube protocol

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        self.faults.hit("get")
        with self._lock:
            return self._public(self._get((kind, namespace or "", name)))

    def list(self, kind: str, namespace: str | None, *, label_selector: str | None = None
             ) -> list[dict[str, Any]]:
        self.faults.hit("list")
        for hook in list(self.before_list):
            hook(kind)
        return self._list(kind, namespace, label_selector)

    def list_versioned(self, kind: str, namespace: str | None
                       ) -> tuple[builtins.list[dict[str, Any]], str]:
        self.faults.hit("list")
        with self._lock:
            return (self._list(kind, namespace, None),
                    str(self.events[-1][0]) if self.events else "0")

    def _list(self, kind: str, namespace: str | None, label_selector: str | None
              ) -> builtins.list[dict[str, Any]]:
        wanted = dict(part.split("=", 1) for part in label_selector.split(",")
                      ) if label_selector else {}
        with self._lock:
            return [self._public(o) for (k, ns, _), o in self.objects.items()
                    if k == kind and (namespace is None or ns == namespace)
                    and wanted.items() <= ((o.get("metadata") or {}).get("labels") or {}).items()]

    @staticmethod
    def _check_size(kind: str, body: Mapping[str, Any]) -> None:
        """A ConfigMap's data is limited to 1 MiB, as the API server limits it (422)."""
        if kind == "ConfigMap" and sum(len(str(v).encode()) for v in (
                body.get("data") or {}).values()) > 1024 * 1024:
            raise RejectedError("kubernetes", f"write {kind}", "invalid", status=422,
                                details=[("[]", "FieldValueTooLong")])

    def create(self, kind: str, namespace: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        self.faults.hit("create")
        self._check_size(kind, body)
        with self._lock:
            obj = copy.deepcopy(dict(body))
            obj["kind"] = kind
            meta = obj.setdefault("metadata", {})
            meta["namespace"] = namespace or ""
            key = (kind, namespace or "", meta["name"])
            if key in self.objects:
                raise ConflictError("kubernetes", f"create {kind}", "already exists", status=409)
            meta["generation"] = 1
            meta["uid"] = f"uid-{meta['name']}"
            self.objects[key] = obj
            self._bump(key, obj, "ADDED")
            out = self._public(obj)
        self._run_controllers(kind, namespace or "", meta["name"])
        return out

    def replace(self, kind: str, namespace: str | None, name: str, body: Mapping[str, Any]
                ) -> dict[str, Any]:
        self.faults.hit("replace")
        self._check_size(kind, body)
        with self._lock:
            key = (kind, namespace or "", name)
            cur = self._get(key)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise ConflictError("kubernetes", f"replace {kind}", "conflict", status=409)
            obj = copy.deepcopy(dict(body))
            obj["kind"] = kind
            obj["metadata"]["generation"] = cur["metadata"]["generation"] + (
                1 if obj.get("spec") != cur.get("spec") else 0)
            self.objects[key] = obj
            self._bump(key, obj, "MODIFIED")
            out = self._public(obj)
        self._run_controllers(kind, namespace or "", name)
        return out

    def patch(self, kind: str, namespace: str | None, name: str, body: Any, *,
              patch_type: PatchType = "merge") -> dict[str, Any]:
        self.faults.hit("patch")
        with self._lock:
            key = (kind, namespace or "", name)
            cur = self._get(key)
            self.patches.append((kind, namespace or "", name, copy.deepcopy(body)))
            new = _merge(cur, body)
            if new.get("spec") != cur.get("spec"):
                new["metadata"]["generation"] = cur["metadata"]["generation"] + 1
            self.objects[key] = new
            self._bump(key, new, "MODIFIED")
            out = self._public(new)
        self._run_controllers(kind, namespace or "", name)
        return self.get(kind, namespace, name) if self.controllers else out

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        self.faults.hit("delete")
        with self._lock:
            key = (kind, namespace or "", name)
            obj = self._get(key)
            del self.objects[key]
            self.deleted.append(key)
            self._bump(key, obj, "DELETED")
        self._run_controllers(kind, namespace or "", name)

    def watch(self, kind: str, namespace: str | None, *, name: str | None = None,
              resource_version: str | None = None, timeout_seconds: float = 30
              ) -> Iterator[WatchEvent]:
        self.faults.hit("watch")
        with self._lock:
            since = int(resource_version) if resource_version else (
                self.events[-1][0] if self.events else 0)
            self.watches_started += 1
        deadline = datetime.now(UTC).timestamp() + min(timeout_seconds, 2.0)
        while not self._closed:
            with self._lock:
                fresh = [e for e in self.events if e[0] > since and e[2][0] == kind
                         and (namespace is None or e[2][1] == namespace)
                         and (name is None or e[2][2] == name)]
                if not fresh:
                    left = deadline - datetime.now(UTC).timestamp()
                    if left <= 0:
                        return
                    self._lock.wait(left)
                    continue
            for rv, typ, _, obj in fresh:
                since = rv
                yield WatchEvent(typ, obj)  # type: ignore[arg-type]

    def read_secret_key(self, namespace: str, name: str, key: str) -> Secret | None:
        self.faults.hit("read_secret_key")
        with self._lock:
            obj = self._get(("Secret", namespace, name))
            raw = (obj.get("data") or {}).get(key)
            return None if raw is None else Secret(base64.b64decode(raw).decode())

    def secret_keys(self, namespace: str, name: str) -> builtins.list[str]:
        self.faults.hit("secret_keys")
        with self._lock:
            return sorted(self._get(("Secret", namespace, name)).get("data") or {})

    def write_secret_key(
        self, namespace: str, name: str, key: str, value: Secret, *,
        annotations: Mapping[str, str] | None = None, resource_version: str | None = None,
    ) -> str:
        self.faults.hit("write_secret_key")
        with self._lock:
            k = ("Secret", namespace, name)
            obj = self._get(k)
            if resource_version and resource_version != obj["metadata"].get("resourceVersion"):
                raise ConflictError("kubernetes", f"write secret/{namespace}/{name}",
                                    "the object has been modified", status=409)
            if annotations:
                obj["metadata"].setdefault("annotations", {}).update(annotations)
            obj.setdefault("data", {})[key] = base64.b64encode(value.reveal().encode()).decode()
            self._bump(k, obj, "MODIFIED")
            rv = str(obj["metadata"]["resourceVersion"])
        self._run_controllers("Secret", namespace, name)
        return rv

    def create_secret(self, namespace: str, name: str, values: Mapping[str, Secret], *,
                      labels: Mapping[str, str] | None = None) -> None:
        self.faults.hit("create_secret")
        data = {k: base64.b64encode(v.reveal().encode()).decode() for k, v in values.items()}
        self.create("Secret", namespace, {"kind": "Secret", "type": "Opaque", "data": data,
                                          "metadata": {"name": name,
                                                       "labels": dict(labels or {})}})

    def pod_log_tail(self, namespace: str, pod: str, lines: int) -> str:
        """What ``pod_logs[(namespace, pod)]`` holds (a test or a fake controller writes it)."""
        self.faults.hit("pod_log_tail")
        with self._lock:
            self._get(("Pod", namespace, pod))
            text = self.pod_logs.get((namespace, pod))
        if text is None:
            raise NotFoundError("kubernetes", f"read log of pod/{namespace}/{pod}",
                                "not found", status=404)
        kept = text.splitlines(keepends=True)[-lines:] if lines > 0 else []
        return "".join(kept)

    def can_i(self, verb: str, kind: str, namespace: str | None, *,
              subresource: str | None = None, name: str | None = None) -> bool:
        return (verb, kind, namespace) not in self.denied

    def proxy_get(self, namespace: str, service: str, port: str | int, path: str, *,
                  timeout: float = 5) -> int:
        return 200

    def port_forward(self, namespace: str, pod: str, port: int) -> Endpoint:
        """Recorded; the fake connector ignores endpoints, so any loopback one will do."""
        self.faults.hit("port_forward")
        self.forwards.append((namespace, pod, port))
        return Endpoint("127.0.0.1", 40000 + len(self.forwards))

    def close_forwards(self) -> None:
        self.forwards_closed += 1

    def create_event(self, event: KubeEvent) -> None:
        """Stored as an Event object too, so ``list("Event", ns)`` shows it as the API does."""
        self.faults.hit("create_event")
        ref = event.involved
        with self._lock:
            name = f"{ref.name}.{len(self.kube_events):016x}"
            involved = {"kind": ref.kind, "name": ref.name, "namespace": ref.namespace}
            if event.uid:
                involved["uid"] = event.uid
            at = (event.at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
            obj = {"kind": "Event", "metadata": {"name": name, "namespace": ref.namespace,
                                                 "uid": f"uid-{name}"},
                   "involvedObject": involved, "type": event.type, "reason": event.reason,
                   "message": event.message, "action": event.action,
                   "source": {"component": "rotate"}, "reportingComponent": "rotate",
                   "reportingInstance": event.instance, "firstTimestamp": at,
                   "lastTimestamp": at, "count": 1}
            self.kube_events.append(event)
            key = ("Event", ref.namespace, name)
            self.objects[key] = obj
            self._bump(key, obj, "ADDED")

    def close(self) -> None:
        self._closed = True
        with self._lock:
            self._lock.notify_all()

    # helpers
    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        s = self.read_secret_key(namespace, name, key)
        return s.reveal() if s is not None else None


# --------------------------------------------------------------------------- Config Center


class JournalUnreachableKube(FakeKube):
    """A FakeKube whose ConfigMap requests fail as an unreachable API server's do while
    ``journal_down`` is set (the lab's ``journal-unreachable`` fault); the rest works."""

    journal_down = False

    def _journal(self, kind: str, op: str) -> None:
        if kind == "ConfigMap" and self.journal_down:
            from rotate.core.errors import TemporaryError

            raise TemporaryError("kubernetes", op, "unreachable")

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        self._journal(kind, "get")
        return super().get(kind, namespace, name)

    def list(self, kind: str, namespace: str | None, *, label_selector: str | None = None
             ) -> builtins.list[dict[str, Any]]:
        self._journal(kind, "list")
        return super().list(kind, namespace, label_selector=label_selector)

    def create(self, kind: str, namespace: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        self._journal(kind, "create")
        return super().create(kind, namespace, body)

    def replace(self, kind: str, namespace: str | None, name: str, body: Mapping[str, Any]
                ) -> dict[str, Any]:
        self._journal(kind, "replace")
        return super().replace(kind, namespace, name, body)
