"""SPDY/3.1 framing, the part kubectl's ``port-forward`` speaks (sans-IO).

kubectl upgrades ``POST …/pods/NAME/portforward`` to ``SPDY/3.1`` (after its websocket
attempt, ``SPDY/3.1+portforward.k8s.io`` tunnelled in websocket, is refused) and then opens,
per local connection, two streams with ``SYN_STREAM`` (headers ``streamtype: error|data``,
``port``, ``requestid``).  No maintained Python library speaks SPDY, and the lab is test
infrastructure, so this module frames it itself, following the SPDY/3 draft and the Go framer
kubectl uses (``github.com/moby/spdystream/spdy``), for exactly what that client sends:

- control frames ``SYN_STREAM``, ``SYN_REPLY``, ``RST_STREAM``, ``SETTINGS``, ``PING``,
  ``GOAWAY``, ``HEADERS``, ``WINDOW_UPDATE`` (version 3), and data frames with ``FIN``;
- name/value header blocks compressed with zlib and the SPDY/3 dictionary, one compression
  context per direction for the whole connection, each block ended by a sync flush;
- no flow control (spdystream sends no ``WINDOW_UPDATE`` and ignores them), no priorities.

:class:`Decoder` turns bytes into :class:`Frame` values; the ``encode_*`` functions (and
:class:`Encoder` for header blocks) turn replies into bytes.  tests/lab/test_spdy.py checks
both against frames built by hand from the draft's layout.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS = 1, 2, 3, 4
PING, GOAWAY, HEADERS, WINDOW_UPDATE = 6, 7, 8, 9
FLAG_FIN = 0x01
#: RST_STREAM status codes used here
PROTOCOL_ERROR, INVALID_STREAM, CANCEL = 1, 2, 5
MAX_DATA = (1 << 24) - 1

_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
    "accept-encoding", "accept-language", "accept-ranges", "age", "allow", "authorization",
    "cache-control", "connection", "content-base", "content-encoding", "content-language",
    "content-length", "content-location", "content-md5", "content-range", "content-type",
    "date", "etag", "expect", "expires", "from", "host", "if-match", "if-modified-since",
    "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer",
    "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent",
    "vary", "via", "warning", "www-authenticate", "method", "get", "status", "200 OK",
    "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin",
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504"
    "505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, "
    "Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
#: the SPDY/3 header dictionary (draft 3, 2.6.10.1): length-prefixed words, then a tail
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()


class SpdyError(ValueError):
    """The peer sent something that is not SPDY/3 as this framer reads it."""


@dataclass(frozen=True)
class Frame:
    """One frame.  Control frames: ``kind`` (SYN_STREAM …), ``stream_id`` where the frame
    has one, ``headers`` (SYN_STREAM, SYN_REPLY, HEADERS), ``value`` (PING id, RST_STREAM
    and GOAWAY status, WINDOW_UPDATE delta).  Data frames: ``kind`` 0, ``data``."""

    kind: int
    flags: int
    stream_id: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    data: bytes = b""
    value: int = 0

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


def _parse_block(raw: bytes) -> dict[str, str]:
    """A decompressed name/value block; repeated values (NUL-separated) are kept whole."""
    try:
        (count,) = struct.unpack_from(">I", raw, 0)
        at, out = 4, {}
        for _ in range(count):
            (n,) = struct.unpack_from(">I", raw, at)
            name = raw[at + 4:at + 4 + n].decode()
            at += 4 + n
            (v,) = struct.unpack_from(">I", raw, at)
            value = raw[at + 4:at + 4 + v].decode()
            at += 4 + v
            out[name.lower()] = value
    except (struct.error, UnicodeDecodeError):
        raise SpdyError("malformed header block") from None
    return out


class Decoder:
    """Bytes in, frames out; one per connection (its header decompressor is stateful)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer, 0)
            length = second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            flags = second >> 24
            if first & 0x80000000:
                version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
                if version != VERSION:
                    raise SpdyError(f"SPDY version {version}, not {VERSION}")
                frames.append(self._control(kind, flags, payload))
            else:
                frames.append(Frame(0, flags, first & 0x7FFFFFFF, data=payload))
        return frames

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error:
            raise SpdyError("header block does not inflate") from None
        return _parse_block(raw)

    def _control(self, kind: int, flags: int, payload: bytes) -> Frame:
        try:
            if kind == SYN_STREAM:
                (sid,) = struct.unpack_from(">I", payload, 0)
                return Frame(kind, flags, sid & 0x7FFFFFFF, self._headers(payload[10:]))
            if kind in (SYN_REPLY, HEADERS):
                (sid,) = struct.unpack_from(">I", payload, 0)
                return Frame(kind, flags, sid & 0x7FFFFFFF, self._headers(payload[4:]))
            if kind in (RST_STREAM, WINDOW_UPDATE):
                sid, value = struct.unpack_from(">II", payload, 0)
                return Frame(kind, flags, sid & 0x7FFFFFFF, value=value)
            if kind == GOAWAY:
                sid, value = struct.unpack_from(">II", payload, 0)
                return Frame(kind, flags, sid & 0x7FFFFFFF, value=value)
            if kind == PING:
                (pid,) = struct.unpack_from(">I", payload, 0)
                return Frame(kind, flags, value=pid)
        except struct.error:
            raise SpdyError(f"control frame {kind} too short") from None
        return Frame(kind, flags)  # SETTINGS and anything newer: nothing to act on


class Encoder:
    """Header blocks out, with the connection's one compression context."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(level=9, zdict=DICTIONARY)

    def block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            n, v = name.lower().encode(), value.encode()
            raw += struct.pack(">I", len(n)) + n + struct.pack(">I", len(v)) + v
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def encode_syn_reply(encoder: Encoder, stream_id: int, headers: dict[str, str], *,
                     fin: bool = False) -> bytes:
    return _control(SYN_REPLY, FLAG_FIN if fin else 0,
                    struct.pack(">I", stream_id) + encoder.block(headers))


def encode_syn_stream(encoder: Encoder, stream_id: int, headers: dict[str, str], *,
                      fin: bool = False) -> bytes:
    """A client's SYN_STREAM (the tests play kubectl with it)."""
    return _control(SYN_STREAM, FLAG_FIN if fin else 0,
                    struct.pack(">IIBB", stream_id, 0, 0, 0) + encoder.block(headers))


def encode_data(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    out = b""
    while len(data) > MAX_DATA:
        out += struct.pack(">II", stream_id, MAX_DATA) + data[:MAX_DATA]
        data = data[MAX_DATA:]
    return out + struct.pack(">II", stream_id, ((FLAG_FIN if fin else 0) << 24) | len(data)) \
        + data


def encode_rst_stream(stream_id: int, status: int) -> bytes:
    return _control(RST_STREAM, 0, struct.pack(">II", stream_id, status))


def encode_ping(ping_id: int) -> bytes:
    return _control(PING, 0, struct.pack(">I", ping_id))


def encode_goaway(last_stream_id: int, status: int = 0) -> bytes:
    return _control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))
