"""Listening on every ClusterIP:port and splicing connections to endpoints, on one loop.

Each accepted connection is paused (nothing read) until an upstream connection to a Ready
endpoint is open, then bytes flow both ways through asyncio transports: no thread per
connection, and back-pressure from the slow side pauses reading on the other
(``pause_writing`` → ``pause_reading``), so a stalled peer never makes the proxy buffer
without bound.

Invariants:

- Endpoints are chosen when the connection is accepted, round-robin over the Ready ones; the
  others are fallbacks if the choice refuses (a pod that just exited).  No Ready endpoint,
  or none that accepts within ``CONNECT_TIMEOUT``: the client's connection is closed.
- A half-close is passed on (``write_eof``): a client that shuts down its sending side still
  gets the whole answer.  Both sides are closed once each has sent EOF, or as soon as one
  fails.
- Closing a listener (its Service or port is gone) also aborts the connections it accepted,
  as the thread-based forwarder did.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from typing import cast

from rotate_lab.kubeproxy.table import PortRef, Source, listeners, ready

log = logging.getLogger("rotate_lab.kubeproxy")
CONNECT_TIMEOUT = 2.0


class _Half(asyncio.Protocol):
    """One side of a spliced connection; writes what it reads to its peer's transport."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Half | None = None
        self.got_eof = False
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)

    def eof_received(self) -> bool:
        self.got_eof = True
        peer = self.peer
        if peer is None or peer.transport is None or peer.transport.is_closing():
            return False
        with contextlib.suppress(OSError, RuntimeError):
            peer.transport.write_eof()
        if peer.got_eof:
            self.close()
            peer.close()
        return True  # keep our sending side open: the peer may still answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.peer is not None:
            self.peer.close()

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def _same(half: _Half) -> _Half:
    return half


class _Client(_Half):
    """An accepted connection: held paused until its upstream is connected."""

    def __init__(self, listener: _Listener) -> None:
        super().__init__()
        self.listener = listener
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport = cast(asyncio.Transport, transport)
        self.transport.pause_reading()
        self.listener.conns.add(self)
        self._task = asyncio.get_running_loop().create_task(self._connect())

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.conns.discard(self)
        if self._task is not None and not self._task.done():
            self._task.cancel()
        super().connection_lost(exc)

    def abort(self) -> None:
        super().abort()
        if self.peer is not None:
            self.peer.abort()

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        for ip, port in self.listener.owner.pick(self.listener.ref):
            upstream = _Half()
            upstream.peer = self  # what it reads goes to the client, even before we resume
            try:
                await asyncio.wait_for(
                    loop.create_connection(functools.partial(_same, upstream), ip, port),
                    CONNECT_TIMEOUT)
            except (OSError, TimeoutError):
                continue
            if self.closed or self.transport is None:
                upstream.close()
                return
            self.peer = upstream
            self.transport.resume_reading()
            return
        self.close()  # no Ready endpoint accepted: close, as a Service without endpoints


class _Listener:
    """One ClusterIP:port: its server socket and the connections it accepted."""

    def __init__(self, owner: Forwarder, ref: PortRef) -> None:
        self.owner, self.ref = owner, ref
        self.server: asyncio.Server | None = None
        self.conns: set[_Client] = set()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for conn in list(self.conns):
            conn.abort()


class Forwarder:
    """Keeps one listener per wanted ClusterIP:port, reconciled whenever :meth:`wake` is called.

    Reconciling runs in one task, so listeners are opened and closed in order, and a bind
    failure (the address taken by someone else) is logged once and retried at the next wake.
    """

    def __init__(self, source: Source) -> None:
        self.source = source
        self.listeners: dict[tuple[str, int], _Listener] = {}
        self._rr = itertools.count()
        self._bind_failed: set[tuple[str, int]] = set()
        self._dirty = asyncio.Event()
        self._sync_lock = asyncio.Lock()

    def wake(self) -> None:
        self._dirty.set()

    def pick(self, ref: PortRef) -> list[tuple[str, int]]:
        """Ready endpoints of ``ref`` in round-robin order (first = choice, rest = fallbacks)."""
        eps = ready(self.source, ref)
        if not eps:
            return []
        start = next(self._rr) % len(eps)
        return eps[start:] + eps[:start]

    def listening(self) -> list[tuple[str, int]]:
        return sorted(k for k, lst in self.listeners.items() if lst.server is not None)

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile on every wake until ``stop``; then close every listener."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                dirty = asyncio.ensure_future(self._dirty.wait())
                await asyncio.wait({dirty, stopping}, return_when=asyncio.FIRST_COMPLETED)
                dirty.cancel()
                if stop.is_set():
                    break
                self._dirty.clear()
                await self.sync()
        finally:
            stopping.cancel()
            for lst in self.listeners.values():
                lst.close()
            self.listeners.clear()

    async def sync(self) -> None:
        """Open and close listeners to match the Services now; one sync at a time."""
        async with self._sync_lock:
            await self._sync()

    async def _sync(self) -> None:
        want = listeners(self.source.services())
        for key in [k for k, lst in self.listeners.items() if want.get(k) != lst.ref]:
            self.listeners.pop(key).close()
        loop = asyncio.get_running_loop()
        for key, ref in want.items():
            if key in self.listeners:
                continue
            lst = _Listener(self, ref)
            try:
                lst.server = await loop.create_server(
                    functools.partial(_Client, lst), key[0], key[1], reuse_address=True,
                    backlog=128)
            except OSError as exc:
                if key not in self._bind_failed:  # retried at every wake: say it once
                    self._bind_failed.add(key)
                    log.error("service %s/%s: cannot listen on %s:%s (%s)", ref.namespace,
                              ref.name, key[0], key[1], exc.strerror)
                continue
            self._bind_failed.discard(key)
            self.listeners[key] = lst
