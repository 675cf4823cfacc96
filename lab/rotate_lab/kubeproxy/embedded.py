"""The proxy's forwarder fed straight from a :class:`Store`, on a thread of its own.

For in-process clusters without an API server (the workload tests' ``MiniCluster``): the
same listeners and splicing as the kube-proxy process, but Services and Endpoints are read
from the store itself — Endpoints at each connection, exactly as the process reads its
watch-fed cache — so a test that saw an Endpoints change in the store may rely on the next
connection seeing it too.  The lab itself never uses this: its ClusterIPs are carried by
``python -m rotate_lab.kubeproxy``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from rotate_lab.cluster.api.store import ApiError, Store
from rotate_lab.kubeproxy.forward import Forwarder

Obj = dict[str, Any]


class StoreSource:
    """:class:`rotate_lab.kubeproxy.table.Source` over a Store (thread-safe reads)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def services(self) -> list[Obj]:
        return self.store.list("Service")[0]

    def endpoints(self, namespace: str, name: str) -> Obj | None:
        try:
            return self.store.get("Endpoints", namespace, name)
        except ApiError:
            return None


class EmbeddedProxy:
    """Start with :meth:`start`, stop with :meth:`stop` (closes every listener)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._forwarder: Forwarder | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-kube-proxy", daemon=True)

    def start(self) -> EmbeddedProxy:
        self._thread.start()
        self._ready.wait(5.0)
        self.store.subscribe(self._on_change)
        self._wake()
        return self

    def listening(self) -> list[tuple[str, int]]:
        """The ClusterIP:ports with an open listener (a snapshot)."""
        fwd = self._forwarder
        return [] if fwd is None else list(fwd.listening())

    def _on_change(self, _event: str, kind: str, _obj: Obj) -> None:
        if kind == "Service":
            self._wake()

    def _wake(self) -> None:
        if self._forwarder is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed under us: stopped
                self._loop.call_soon_threadsafe(self._forwarder.wake)

    def _run(self) -> None:
        async def main() -> None:
            self._stop = asyncio.Event()
            self._forwarder = Forwarder(StoreSource(self.store))
            self._ready.set()
            await self._forwarder.run(self._stop)

        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(main())

    def stop(self) -> None:
        if self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            self._loop.close()
