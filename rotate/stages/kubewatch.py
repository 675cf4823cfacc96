"""A ``pause`` for :func:`rotate.core.waiting.wait_for` that wakes on Kubernetes watch events.

Waiting for ESO or a rollout should react to the change, not to a polling period.  A daemon
thread follows ``Kube.watch`` for one object (or one kind in a namespace) and sets an event
on every change; :meth:`WatchPause.__call__` returns as soon as that event is set, or after
the back-off interval wait_for asked for.  The condition itself is re-read with a fresh GET,
or — for a watch of one named object — judged on the newest object the watch delivered since
the last check (:meth:`WatchPause.take`): a state the server had after the watch began, so a
broken or chatty watch can make the wait slower or busier, never wrong; a pause that ended
without an event falls back to the GET, and the back-off bounds how often ``check`` runs.
(Waits on the Pods of a namespace read the run's shared copy instead: rotate.stages.kubecache.)
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from rotate.clients.seams import Kube
from rotate.core.errors import ClientError

#: After a failed or immediately closed watch, wait this long before watching again, so a
#: server that refuses watches costs one request per second instead of a busy loop.
_REWATCH_PAUSE = 1.0


class WatchPause:
    def __init__(
        self, kube: Kube, kind: str, namespace: str | None, name: str | None = None,
        *, server_timeout: float = 10,
    ) -> None:
        self._kube = kube
        self._kind = kind
        self._namespace = namespace
        self._name = name
        self._server_timeout = server_timeout
        self._changed = threading.Event()
        self._latest: Mapping[str, Any] | None = None
        self._latest_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._follow, name=f"watch-{kind}-{name or namespace}", daemon=True
        )
        self._thread.start()

    def _follow(self) -> None:
        rv: str | None = None
        while not self._stop.is_set():
            got_event = False
            try:
                for event in self._kube.watch(
                    self._kind, self._namespace, name=self._name, resource_version=rv,
                    timeout_seconds=self._server_timeout,
                ):
                    if self._stop.is_set():
                        return
                    if event.type == "ERROR":
                        rv = None  # e.g. 410 Gone: start again from "now"
                        break
                    got_event = True
                    meta = event.object.get("metadata") or {}
                    rv = str(meta.get("resourceVersion") or rv or "") or None
                    if event.type in ("ADDED", "MODIFIED"):
                        with self._latest_lock:
                            self._latest = event.object
                    self._changed.set()
            except ClientError:
                rv = None
            if not got_event:
                self._stop.wait(_REWATCH_PAUSE)

    def take(self) -> Mapping[str, Any] | None:
        """The newest object an ADDED/MODIFIED event delivered since the last take (None: no
        such event — the caller GETs).  Meant for a watch of one named object."""
        with self._latest_lock:
            latest, self._latest = self._latest, None
        return latest

    def __call__(self, seconds: float) -> None:
        self._changed.wait(max(0.0, seconds))
        self._changed.clear()

    def close(self) -> None:
        self._stop.set()
        self._changed.set()

    def __enter__(self) -> WatchPause:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
