"""The lab's SPDY/3.1 framer (rotate_lab/cluster/api/spdy.py) against the draft's layout.

kubectl itself is the end-to-end check (tests/lab/test_portforward.py); these pin the
pieces that would make it fail silently: the dictionary, the header blocks sharing one zlib
context per direction, frames split across reads.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

import pytest
from rotate_lab.cluster.api import spdy

#: the SPDY/3 dictionary (draft 3, 2.6.10.1), as Go's spdy package and spdystream carry it
DICTIONARY_SHA256 = "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"


def test_dictionary_is_the_drafts() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert hashlib.sha256(spdy.DICTIONARY).hexdigest() == DICTIONARY_SHA256


def test_frames_round_trip_and_survive_any_split() -> None:
    client = spdy.Encoder()
    wire = (spdy.encode_syn_stream(client, 1, {"streamtype": "error", "port": "5432",
                                                "requestid": "0"})
            + spdy.encode_syn_stream(client, 3, {"streamtype": "data", "port": "5432",
                                                  "requestid": "0"})
            + spdy.encode_data(3, b"select 1", fin=True)
            + spdy.encode_ping(7) + spdy.encode_rst_stream(1, spdy.CANCEL)
            + spdy.encode_goaway(3))
    for step in (1, 7, len(wire)):
        decoder = spdy.Decoder()
        frames = [f for at in range(0, len(wire), step)
                  for f in decoder.feed(wire[at:at + step])]
        assert [(f.kind, f.stream_id) for f in frames] == [
            (spdy.SYN_STREAM, 1), (spdy.SYN_STREAM, 3), (0, 3), (spdy.PING, 0),
            (spdy.RST_STREAM, 1), (spdy.GOAWAY, 3)]
        assert frames[1].headers == {"streamtype": "data", "port": "5432", "requestid": "0"}
        assert frames[2].data == b"select 1" and frames[2].fin
        assert frames[3].value == 7 and frames[4].value == spdy.CANCEL


def test_syn_reply_layout() -> None:
    """Control bit, version 3, type 2, flags, 24-bit length, stream id, then a header block
    that inflates with the dictionary to a zero-pair block."""
    frame = spdy.encode_syn_reply(spdy.Encoder(), 5, {})
    first, second, stream_id = struct.unpack(">III", frame[:12])
    assert first == 0x8000_0000 | 3 << 16 | spdy.SYN_REPLY
    assert second >> 24 == 0 and second & 0xFFFFFF == len(frame) - 8
    assert stream_id == 5
    assert zlib.decompressobj(zdict=spdy.DICTIONARY).decompress(frame[12:]) == b"\0\0\0\0"


def test_data_longer_than_a_frame_is_split() -> None:
    wire = spdy.encode_data(1, b"x" * (spdy.MAX_DATA + 10), fin=True)
    frames = spdy.Decoder().feed(wire)
    assert [len(f.data) for f in frames] == [spdy.MAX_DATA, 10]
    assert [f.fin for f in frames] == [False, True]


def test_not_spdy_3_is_refused() -> None:
    with pytest.raises(spdy.SpdyError, match="version 2"):
        spdy.Decoder().feed(struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\0\0\0\1")
