"""kubectl's port-forward: one SPDY/3.1 connection, a pair of streams per forwarded
connection (:mod:`rotate_lab.cluster.api.spdy` frames it).

What the kubelet's SPDY port-forward handler does, and so this: every ``SYN_STREAM`` is
answered with an empty ``SYN_REPLY``; once the ``error`` and ``data`` streams of one
``requestid`` are both open, the pod's port is connected (from the pod's own address, see
:mod:`rotate_lab.cluster.api.portforward`) and bytes are copied both ways.  Either side ending
ends the pair — no half-close, as on a real node — with ``FIN`` on both streams; a port that
cannot be connected gets the kubelet's message on the error stream.  ``PING`` is echoed;
``GOAWAY`` or the connection closing ends the session.  One thread serves the session with a
``select`` loop over the client connection and every pod connection, so any number of
kubectl's local connections share it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from rotate_lab.cluster.api import spdy
from rotate_lab.cluster.api.portforward import (
    CHUNK,
    POLL,
    Target,
    connect,
    connect_error,
    recv_all,
)

#: what the 101 answer carries (kubectl checks the protocol it asked for)
PROTOCOL = "portforward.k8s.io"


@dataclass
class _Pair:
    port: int
    error: int = 0  # stream ids; 0 = not opened yet
    data: int = 0
    pod: socket.socket | None = None


class SpdyForward:
    """One kubectl port-forward session over the upgraded (TLS) connection ``client``."""

    def __init__(self, client: socket.socket, target: Target,
                 stopping: Callable[[], bool],
                 on_stream: Callable[[int], None] = lambda _port: None) -> None:
        self.client = client
        self.target = target
        self.stopping = stopping
        self.on_stream = on_stream  # told each forwarded connection's port (the lab's record)
        self.decoder = spdy.Decoder()
        self.encoder = spdy.Encoder()
        self.pairs: dict[str, _Pair] = {}  # requestid → its streams
        self.last_stream = 0

    def run(self) -> None:
        try:
            self._loop()
        finally:
            for pair in self.pairs.values():
                self._close_pod(pair)
            with contextlib.suppress(OSError, ssl.SSLError):
                self.client.sendall(spdy.encode_goaway(self.last_stream))

    def _loop(self) -> None:
        while not self.stopping():
            pods = {p.pod: key for key, p in self.pairs.items() if p.pod is not None}
            readable, _, _ = select.select([self.client, *pods], [], [], POLL)
            if self.client in readable or (isinstance(self.client, ssl.SSLSocket)
                                           and self.client.pending()):
                data = recv_all(self.client)
                if not data:
                    return
                try:
                    frames = self.decoder.feed(data)
                except spdy.SpdyError:
                    return  # not SPDY as kubectl speaks it: drop the connection
                for frame in frames:
                    if not self._handle(frame):
                        return
            for sock in readable:
                if sock is not self.client and sock in pods:
                    self._from_pod(pods[sock])

    def _handle(self, frame: spdy.Frame) -> bool:
        """Act on one frame from kubectl; False when the session ends."""
        if frame.kind == spdy.SYN_STREAM:
            self._open_stream(frame)
        elif frame.kind == spdy.PING:
            self.client.sendall(spdy.encode_ping(frame.value))
        elif frame.kind == spdy.GOAWAY:
            return False
        elif frame.kind == spdy.RST_STREAM:
            self._end(self._pair_of(frame.stream_id), reset=True)
        elif frame.kind == 0:
            key = self._pair_of(frame.stream_id)
            pair = self.pairs.get(key or "")
            if pair is not None and frame.stream_id == pair.data:
                if frame.data and pair.pod is not None:
                    try:
                        pair.pod.sendall(frame.data)
                    except OSError:
                        self._end(key)
                        return True
                if frame.fin:
                    self._end(key)
        return True

    def _pair_of(self, stream_id: int) -> str | None:
        return next((k for k, p in self.pairs.items() if stream_id in (p.error, p.data)), None)

    def _open_stream(self, frame: spdy.Frame) -> None:
        sid, headers = frame.stream_id, frame.headers
        self.last_stream = max(self.last_stream, sid)
        kind, port_text = headers.get("streamtype", ""), headers.get("port", "")
        if kind not in ("error", "data") or not port_text.isdigit():
            self.client.sendall(spdy.encode_rst_stream(sid, spdy.PROTOCOL_ERROR))
            return
        self.client.sendall(spdy.encode_syn_reply(self.encoder, sid, {}))
        key = headers.get("requestid") or port_text
        pair = self.pairs.setdefault(key, _Pair(int(port_text)))
        if kind == "error":
            pair.error = sid
        else:
            pair.data = sid
        if pair.error and pair.data and pair.pod is None:
            self.on_stream(pair.port)
            try:
                pair.pod = connect(self.target, pair.port)
            except OSError as exc:
                message = connect_error(self.target, pair.port, exc).encode()
                self.client.sendall(spdy.encode_data(pair.error, message, fin=True))
                self.client.sendall(spdy.encode_data(pair.data, b"", fin=True))
                del self.pairs[key]

    def _from_pod(self, key: str) -> None:
        pair = self.pairs.get(key)
        if pair is None or pair.pod is None:
            return
        try:
            data = pair.pod.recv(CHUNK)
        except OSError:
            data = b""
        if not data:
            self._end(key)
            return
        self.client.sendall(spdy.encode_data(pair.data, data))

    def _end(self, key: str | None, *, reset: bool = False) -> None:
        """The pair is done: its pod connection closed, ``FIN`` on both streams (not after
        a reset: the client dropped them already)."""
        pair = self.pairs.pop(key or "", None)
        if pair is None:
            return
        self._close_pod(pair)
        if not reset:
            for sid in (pair.data, pair.error):
                if sid:
                    self.client.sendall(spdy.encode_data(sid, b"", fin=True))

    @staticmethod
    def _close_pod(pair: _Pair) -> None:
        if pair.pod is not None:
            with contextlib.suppress(OSError):
                pair.pod.close()
            pair.pod = None
