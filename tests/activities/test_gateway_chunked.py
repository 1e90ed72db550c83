"""The gateway's reading of a chunked answer (http_wire.ChunkedBody): the same payload however
the bytes are cut, the events that came in one read handed on as one piece (one write to the
client, not one per event), its end seen with trailers, and a broken framing refused."""

from __future__ import annotations

import pytest

from activities.gateway.http_wire import ChunkedBody

EVENTS = [b"event: a\ndata: {}\n\n", b'event: b\ndata: {"usage": 1}\n\n', b"x" * 300]


def framed(pieces: list[bytes], ending: bytes = b"0\r\n\r\n") -> bytes:
    return b"".join(f"{len(p):x};ext=1\r\n".encode() + p + b"\r\n" for p in pieces) + ending


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 64, 10_000])
def test_any_cut_of_the_bytes_gives_the_payload_and_the_end(cut: int) -> None:
    raw = framed(EVENTS, b"0\r\nx-trailer: 1\r\n\r\n")
    body, payload = ChunkedBody(), b""
    for start in range(0, len(raw), cut):
        assert not body.done
        payload += body.feed(raw[start : start + cut])
    assert payload == b"".join(EVENTS)
    assert body.done and body.extra == b""


def test_events_that_came_together_are_one_piece() -> None:
    body = ChunkedBody()
    assert body.feed(framed(EVENTS)) == b"".join(EVENTS)
    assert body.done


def test_bytes_past_the_end_are_kept_apart() -> None:
    body = ChunkedBody()
    body.feed(framed(EVENTS[:1]) + b"HTTP/1.1 200")
    assert body.done and body.extra == b"HTTP/1.1 200"


@pytest.mark.parametrize(
    "raw", [b"3\r\nabcX\r\n", b"zz\r\n", b"1" * 9000], ids=["no CRLF", "no size", "endless size"]
)
def test_broken_framing_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        ChunkedBody().feed(raw)
