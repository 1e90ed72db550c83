"""`overnight codec-server`: Temporal's remote codec protocol, CORS for the Web UI, the token."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict, ParseDict
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter

from overnight.cli.codec_server import (
    MAX_BODY_BYTES,
    TOKEN_ENV,
    CodecServer,
    CodecServerSettings,
    Limits,
)
from overnight.core.codec import CODEC_KEYS_ENV, ENCODING, data_converter, parse_keys
from overnight.core.grants import NEVER_GRANTED
from tests.conftest import free_port
from tests.waits import CAP

OVERNIGHT = Path(sys.executable).parent / "overnight"
UI = "http://127.0.0.1:8233"
KEY = base64.b64encode(b"k" * 32).decode()
KEYS = f"main:{KEY}"
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def call(
    url: str, body: object = None, method: str = "POST", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("X-Namespace", "default")
    for name, value in headers.items():
        request.add_header(name.replace("_", "-"), value)
    try:
        with _opener.open(request, timeout=CAP) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def as_json(payloads: list[Payload]) -> dict[str, object]:
    return {"payloads": [MessageToDict(p) for p in payloads]}


def from_json(body: bytes) -> list[Payload]:
    return [ParseDict(item, Payload()) for item in json.loads(body)["payloads"]]


@pytest.fixture
def server() -> Iterator[CodecServer]:
    settings = CodecServerSettings(keyring=parse_keys(KEYS), port=0, origins=(UI,))
    with CodecServer(settings) as running:
        yield running


async def test_decode_and_encode_speak_temporals_remote_codec_protocol(
    server: CodecServer,
) -> None:
    codec_on = data_converter(parse_keys(KEYS))
    encrypted = await codec_on.encode(["the secret plan", {"step": 3}])
    status, headers, body = call(f"{server.url}/decode", as_json(encrypted))
    assert status == 200, body
    assert headers["Content-Type"] == "application/json"
    assert await pydantic_data_converter.decode(from_json(body), [str, dict]) == [
        "the secret plan",
        {"step": 3},
    ]
    # The body's bytes are proto3 JSON, base64: the encoding reads as its base64.
    assert (
        json.loads(body)["payloads"][0]["metadata"]["encoding"]
        == base64.b64encode(b"json/plain").decode()
    )

    plain = await pydantic_data_converter.encode(["typed in the Web UI"])
    status, _, body = call(f"{server.url}/default/encode", as_json(plain))  # namespace path
    assert status == 200, body
    [sealed] = from_json(body)
    assert sealed.metadata["encoding"] == ENCODING
    assert await codec_on.decode([sealed], [str]) == ["typed in the Web UI"]


async def test_an_unknown_key_id_is_a_400_naming_the_payloads_id(server: CodecServer) -> None:
    other = data_converter(parse_keys(f"old:{base64.b64encode(b'o' * 32).decode()}"))
    status, _, body = call(f"{server.url}/decode", as_json(await other.encode(["x"])))
    assert status == 400
    assert "key id 'old'" in json.loads(body)["error"]
    assert KEY not in body.decode() and "main" not in body.decode()


def test_the_web_uis_origin_gets_cors_and_other_origins_do_not(server: CodecServer) -> None:
    status, headers, _ = call(
        f"{server.url}/decode",
        method="OPTIONS",
        Origin=UI,
        Access_Control_Request_Method="POST",
        Access_Control_Request_Headers="content-type,x-namespace",
    )
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == UI
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert "X-Namespace" in headers["Access-Control-Allow-Headers"]

    status, headers, _ = call(f"{server.url}/decode", {"payloads": []}, Origin=UI)
    assert status == 200 and headers["Access-Control-Allow-Origin"] == UI

    evil = "http://evil.example"
    status, headers, _ = call(f"{server.url}/decode", method="OPTIONS", Origin=evil)
    assert status == 403 and "Access-Control-Allow-Origin" not in headers
    status, headers, _ = call(f"{server.url}/decode", {"payloads": []}, Origin=evil)
    assert status == 403 and "Access-Control-Allow-Origin" not in headers


def test_bad_requests_get_clear_answers(server: CodecServer) -> None:
    assert call(f"{server.url}/decode", method="GET")[0] == 405
    assert call(f"{server.url}/other", {"payloads": []})[0] == 404
    status, _, body = call(f"{server.url}/decode", {"nothing": 1})
    assert status == 400 and "payloads" in json.loads(body)["error"]


async def test_with_a_token_every_call_needs_it() -> None:
    settings = CodecServerSettings(
        keyring=parse_keys(KEYS), port=0, origins=(UI,), token="s3cret-token"
    )
    encrypted = await data_converter(parse_keys(KEYS)).encode(["x"])
    with CodecServer(settings) as server:
        assert call(f"{server.url}/decode", as_json(encrypted))[0] == 401
        wrong = call(f"{server.url}/decode", as_json(encrypted), Authorization="Bearer nope")
        assert wrong[0] == 401
        right = call(
            f"{server.url}/decode", as_json(encrypted), Authorization="Bearer s3cret-token"
        )
        assert right[0] == 200
        # A browser's preflight carries no token: it is answered anyway, for the UI's origin.
        assert call(f"{server.url}/decode", method="OPTIONS", Origin=UI)[0] == 204


# What the command says when its port was taken meanwhile (by another test's server: the
# suite runs in parallel and `free_port` only finds a port free at that moment).
PORT_TAKEN = "Address already in use"


def _start_codec_server(port: int) -> tuple[subprocess.Popen[str], str]:
    """The command serving on `port`, and the banner it printed first ("" if it exited)."""
    process = subprocess.Popen(
        [str(OVERNIGHT), "codec-server", "--port", str(port), "--origin", UI],
        env={**os.environ, CODEC_KEYS_ENV: KEYS},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline()


def _stop(process: subprocess.Popen[str]) -> str:
    """Stop the command; what it said on stderr."""
    process.terminate()
    process.wait(timeout=CAP)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    said = process.stderr.read()
    process.stderr.close()
    return said


def test_the_command_serves_on_loopback_and_refuses_a_bad_configuration() -> None:
    # A port taken between `free_port` and the command's bind is another port, never a
    # failure of the command: any other reason it exits before its banner fails the test.
    for _ in range(5):
        port = free_port()
        process, banner = _start_codec_server(port)
        if banner:
            break
        said = _stop(process)
        assert PORT_TAKEN in said, f"exited {process.returncode} before its banner: {said!r}"
    else:
        pytest.fail("five free ports in a row were taken before the command bound them")
    try:
        assert f"codec server at http://127.0.0.1:{port}" in banner, banner
        assert KEY not in banner and "'main'" in banner
        deadline = time.monotonic() + CAP
        while call(f"http://127.0.0.1:{port}/decode", {"payloads": []})[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        _stop(process)

    for keys, reason in (
        ("", f"overnight: {CODEC_KEYS_ENV} is not set: the codec server has no keys"),
        ("main:short", f"overnight: {CODEC_KEYS_ENV}: entry 1 (id 'main'): the key is"),
    ):
        refused = subprocess.run(
            [str(OVERNIGHT), "codec-server", "--port", str(port)],
            env={**os.environ, CODEC_KEYS_ENV: keys},
            capture_output=True,
            text=True,
            timeout=CAP,
        )
        assert refused.returncode == 2
        assert refused.stderr.startswith(reason) and refused.stderr.count("\n") == 1


def test_the_codec_servers_token_is_one_of_the_names_never_granted() -> None:
    # The name the codec server reads is the name the grants refuse: renaming one breaks this.
    assert TOKEN_ENV in NEVER_GRANTED and CODEC_KEYS_ENV in NEVER_GRANTED


# Attacks on the server itself (issue #30): whoever reaches it may hold connections half-sent,
# send huge bodies, or read its errors.


def _raw(server: CodecServer, head: bytes) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=CAP)
    sock.sendall(head)
    return sock


def _answer_of(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


async def test_300_half_sent_requests_hold_no_thread_each_and_a_normal_call_still_answers(
    server: CodecServer,
) -> None:
    before = threading.active_count()
    held = [_raw(server, b"POST /decode HTTP/1.1\r\nHost: x\r\nContent-Le") for _ in range(300)]
    try:
        deadline = time.monotonic() + CAP
        while server.connections < 300:  # the server has taken every one of them
            assert time.monotonic() < deadline, server.connections
            time.sleep(0.05)
        assert threading.active_count() - before < 10
        encrypted = await data_converter(parse_keys(KEYS)).encode(["still here"])
        status, _, body = call(f"{server.url}/decode", as_json(encrypted))
        assert status == 200, body
        assert await pydantic_data_converter.decode(from_json(body), [str]) == ["still here"]
    finally:
        for sock in held:
            sock.close()


def test_a_request_not_sent_within_the_read_timeout_is_answered_408_and_closed() -> None:
    limits = Limits(read_timeout_seconds=0.5)
    settings = CodecServerSettings(keyring=parse_keys(KEYS), port=0, origins=(UI,), limits=limits)
    with CodecServer(settings) as server:
        started = time.monotonic()
        # Headers whole, the body never: the timeout is for headers and body together.
        sock = _raw(server, b"POST /decode HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
        with sock:
            answer = _answer_of(sock)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        # The 0.5 s asked for, not the default (10 s): the bound is that default, not a speed.
        assert 0.4 < time.monotonic() - started < Limits().read_timeout_seconds
        # The server counts the connection closed just after its answer went out.
        deadline = time.monotonic() + CAP
        while server.connections:
            assert time.monotonic() < deadline, server.connections
            time.sleep(0.01)


def test_a_body_over_the_cap_is_refused_413_from_its_length_before_any_of_it_is_read(
    server: CodecServer,
) -> None:
    # A page of history's payloads is at most Temporal's 4 MB gRPC message, as base64: 6 MiB.
    assert MAX_BODY_BYTES == 6 * 2**20
    head = f"POST /decode HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
    with _raw(server, head.encode()) as sock:  # and not one byte of the body
        answer = _answer_of(sock)
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    assert f"at most {MAX_BODY_BYTES} bytes".encode() in answer


async def test_bodies_beyond_what_the_server_buffers_at_once_get_503_not_memory() -> None:
    limits = Limits(max_buffered_bytes=3 * 2**20)
    settings = CodecServerSettings(keyring=parse_keys(KEYS), port=0, origins=(UI,), limits=limits)
    with CodecServer(settings) as server:
        head = b"POST /decode HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n{"
        with _raw(server, head):
            deadline = time.monotonic() + CAP
            while server.buffered_bytes < 2**21:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            # Another 2 MiB does not fit beside it: refused before its body is read.
            with _raw(server, head) as second:
                answer = _answer_of(second)
            assert answer.startswith(b"HTTP/1.1 503 "), answer
            assert b"Retry-After: " in answer
            # A small one still fits.
            encrypted = await data_converter(parse_keys(KEYS)).encode(["small"])
            assert call(f"{server.url}/decode", as_json(encrypted))[0] == 200


async def test_a_payload_it_cannot_decrypt_is_a_400_naming_no_key_id_the_server_holds() -> None:
    held = f"reader-only:{base64.b64encode(b'r' * 32).decode()},{KEYS}"
    settings = CodecServerSettings(keyring=parse_keys(held), port=0, origins=(UI,))
    with CodecServer(settings) as server:
        unknown = data_converter(parse_keys(f"old:{base64.b64encode(b'o' * 32).decode()}"))
        other_key = data_converter(parse_keys(f"main:{base64.b64encode(b'x' * 32).decode()}"))
        answers = []
        for converter in (unknown, other_key):
            status, _, body = call(f"{server.url}/decode", as_json(await converter.encode(["x"])))
            assert status == 400
            answers.append(json.loads(body)["error"])
    # One answer for an id it lacks and for a key that is not the one: no oracle of its ids.
    assert answers[0].replace("'old'", "ID") == answers[1].replace("'main'", "ID"), answers
    assert "reader-only" not in answers[0] and "main" not in answers[0]
    assert "reader-only" not in answers[1] and KEY not in answers[1]


def test_connections_beyond_the_cap_are_answered_503_at_once() -> None:
    limits = Limits(max_connections=2)
    settings = CodecServerSettings(keyring=parse_keys(KEYS), port=0, origins=(UI,), limits=limits)
    with CodecServer(settings) as server:
        held = [_raw(server, b"POST /decode HTTP/1.1\r\n") for _ in range(2)]
        try:
            deadline = time.monotonic() + CAP
            while server.connections < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with _raw(server, b"") as third:
                assert _answer_of(third).startswith(b"HTTP/1.1 503 ")
        finally:
            for sock in held:
                sock.close()


async def test_the_largest_payload_temporal_takes_still_decodes(server: CodecServer) -> None:
    codec_on = data_converter(parse_keys(KEYS))
    big = "x" * (2 * 2**20 - 64)  # Temporal's 2 MB payload limit, near enough
    status, _, body = call(f"{server.url}/decode", as_json(await codec_on.encode([big])))
    assert status == 200
    assert await pydantic_data_converter.decode(from_json(body), [str]) == [big]
