"""The gateway's Gemini API routes, end to end on the loopback: a real gateway, real HTTP, and a
small Gemini upstream of this file's (it answers each request with the next scripted reply and
keeps what it was sent); sandbox records written by hand as the local engine writes them.
The pure parts: test_gateway_gemini_parts.py."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from activities.gateway.service import Gateway, model_stats_of, model_token, spend_of
from overnight.core.model_prices import DEFAULT_PRICES, Usage, dearest, usd_of

KEY_ENV = "OVERNIGHT_TEST_GEMINI_KEY"
KEY = "AIza-worker-secret-0123456789"
SANDBOX = "run-1-1"
RUN = "run-1"
MODEL = "gemini-2.5-pro"
# The last chunk's usageMetadata: 120k prompt of which 100k read from the cache, 3k answered
# after 2k of thinking.
USAGE = {
    "promptTokenCount": 120_000,
    "cachedContentTokenCount": 100_000,
    "candidatesTokenCount": 3_000,
    "thoughtsTokenCount": 2_000,
    "totalTokenCount": 125_000,
}
# At gemini-2.5-pro's $1.25 / $10 / $0.125: 20k fresh in, 100k cached, 5k out.
USD = (20_000 * 1.25 + 100_000 * 0.125 + 5_000 * 10.0) / 1e6
QUESTION = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}


@dataclass
class Reply:
    status: int = 200
    chunks: list[dict[str, Any]] = field(default_factory=list)  # SSE `data:` chunks
    body: dict[str, Any] | None = None  # a whole JSON answer
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    path: str
    headers: dict[str, str]  # lower-cased
    body: bytes


class GeminiUpstream:
    """What the gateway forwards to: each request gets the next reply (SSE chunks, chunked as
    Google sends them, or one JSON object)."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.seen: list[Seen] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                upstream.seen.append(Seen(self.path, headers, body))
                upstream.answer(self, upstream.replies.pop(0))

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @staticmethod
    def answer(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.chunks:
            handler.send_header("content-type", "text/event-stream")
            handler.send_header("transfer-encoding", "chunked")
            handler.end_headers()
            for chunk in reply.chunks:
                data = b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n"
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            handler.wfile.write(b"0\r\n\r\n")
        else:
            data = json.dumps(reply.body or {}).encode()
            handler.send_header("content-type", "application/json; charset=UTF-8")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        handler.wfile.flush()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def streamed(usage: dict[str, int] = USAGE, model_version: str = "") -> Reply:
    """A stream of three chunks, each with the usage so far (the last: `usage`)."""
    so_far = {"promptTokenCount": usage["promptTokenCount"]}

    def chunk(text: str, counts: dict[str, int]) -> dict[str, Any]:
        value: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}],
            "usageMetadata": counts,
            "responseId": "resp-1",
        }
        if model_version:
            value["modelVersion"] = model_version
        return value

    middle = so_far | {"candidatesTokenCount": 1, "totalTokenCount": usage["promptTokenCount"]}
    return Reply(chunks=[chunk("Hel", so_far), chunk("lo", middle), chunk("!", usage)])


def whole(usage: dict[str, int] = USAGE) -> Reply:
    parts = [{"text": "Hello!"}]
    body = {"candidates": [{"content": {"role": "model", "parts": parts}}], "usageMetadata": usage}
    return Reply(body=body)


def google_error(code: int, status: str, *details: dict[str, Any]) -> Reply:
    error = {"code": code, "message": "try later", "status": status, "details": list(details)}
    return Reply(status=code, body={"error": error})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("OVERNIGHT_MODEL_PRICES", raising=False)
    return tmp_path / "home"


@pytest.fixture
def gateway(home: Path) -> Iterator[Gateway]:
    served = Gateway(home)
    served.start()
    yield served
    served.stop()


@pytest.fixture
def upstream() -> Iterator[GeminiUpstream]:
    served = GeminiUpstream([])
    yield served
    served.close()


def record(home: Path, upstream: str, cap: float | None = None) -> None:
    folder = home / "sandboxes" / SANDBOX
    folder.mkdir(parents=True, exist_ok=True)
    model = {"upstream": upstream, "credential_env": KEY_ENV, "run_id": RUN, "cap_usd": cap}
    (folder / "sandbox.json").write_text(json.dumps({"state": "running", "model": model}))


def call(
    gateway: Gateway,
    target: str,
    headers: dict[str, str] | None = None,
    body: dict[str, Any] = QUESTION,
) -> tuple[int, dict[str, str], bytes]:
    assert gateway.port is not None
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=60)
    sent = {"content-type": "application/json"} | (headers or {})
    connection.request("POST", target, body=json.dumps(body), headers=sent)
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    return answer.status, {k.lower(): v for k, v in answer.getheaders()}, data


def ledger(home: Path) -> list[dict[str, Any]]:
    path = home / "gateway" / "spend" / f"{RUN}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_stream_goes_up_with_the_workers_key_only_and_its_last_usage_is_booked_and_priced(
    home: Path, gateway: Gateway, upstream: GeminiUpstream
) -> None:
    upstream.replies.append(streamed())
    record(home, upstream.base_url)
    token = model_token(home, SANDBOX)
    headers = {"x-goog-api-key": token, "x-goog-api-client": "genai-js/1.30.0"}

    status, answered, body = call(
        gateway,
        f"/model/v1beta/models/{MODEL}:streamGenerateContent?alt=sse&key=stray-key&other=1",
        headers,
    )

    assert status == 200, body
    assert answered["content-type"].startswith("text/event-stream")
    assert body.count(b"data: ") == 3 and b'"totalTokenCount": 125000' in body
    (seen,) = upstream.seen
    assert seen.path == f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    assert seen.headers["x-goog-api-key"] == KEY
    assert seen.headers["x-goog-api-client"] == "genai-js/1.30.0"
    assert "authorization" not in seen.headers and "x-api-key" not in seen.headers
    assert token not in json.dumps(seen.headers) and "stray-key" not in seen.path
    assert json.loads(seen.body) == QUESTION
    (line,) = ledger(home)
    assert line["model"] == MODEL and line["route"] == seen.path.partition("?")[0]
    assert line["request_id"] == "resp-1" and line["unpriced"] is False
    assert line["usage"] == Usage(20_000, 5_000, 100_000).as_dict()
    assert line["usd"] == pytest.approx(USD, abs=1e-12)
    assert spend_of(home, RUN) == (pytest.approx(0.0875, abs=1e-12), 1)
    assert KEY.encode() not in body and KEY not in json.dumps(answered)


def test_a_whole_generate_content_answer_is_booked_its_token_given_as_the_query_key(
    home: Path, gateway: Gateway, upstream: GeminiUpstream
) -> None:
    upstream.replies.append(whole())
    record(home, upstream.base_url)
    token = model_token(home, SANDBOX)

    status, _, body = call(gateway, f"/model/v1beta/models/{MODEL}:generateContent?key={token}")

    assert status == 200, body
    assert json.loads(body)["usageMetadata"] == USAGE
    (seen,) = upstream.seen
    assert seen.path == f"/v1beta/models/{MODEL}:generateContent"
    assert seen.headers["x-goog-api-key"] == KEY
    assert spend_of(home, RUN) == (pytest.approx(USD, abs=1e-12), 1)


def test_the_model_priced_is_the_paths_and_one_the_table_lacks_costs_the_dearest(
    home: Path, gateway: Gateway, upstream: GeminiUpstream
) -> None:
    upstream.replies.extend([whole(), whole()])
    record(home, upstream.base_url)
    headers = {"x-goog-api-key": model_token(home, SANDBOX)}
    # The body names another model: the Gemini API takes the path's, and so does the gateway.
    asked = QUESTION | {"model": "gemini-2.5-pro"}

    for model in ("gemini-2.5-flash-lite", "gemini-9-ultra"):
        target = f"/model/v1beta/models/{model}:generateContent"
        assert call(gateway, target, headers, asked)[0] == 200

    cheap, unknown = ledger(home)
    counted = Usage(20_000, 5_000, 100_000)
    assert cheap["model"] == "gemini-2.5-flash-lite" and cheap["unpriced"] is False
    assert cheap["usd"] == pytest.approx(usd_of(DEFAULT_PRICES["gemini-2.5-flash-lite"], counted))
    assert cheap["usd"] == pytest.approx((20_000 * 0.10 + 100_000 * 0.01 + 5_000 * 0.40) / 1e6)
    assert unknown["model"] == "gemini-9-ultra" and unknown["unpriced"] is True
    assert unknown["usd"] == pytest.approx(usd_of(dearest(DEFAULT_PRICES), counted))


@pytest.mark.parametrize(
    "path",
    [
        "/model/v1beta/models/gemini-2.5-pro:embedContent",
        "/model/v1beta/models/gemini-2.5-pro",
        "/model/v1beta/models/..%2Fcached:generateContent",
        "/model/v1beta/tunedModels/mine:generateContent",
    ],
)
def test_another_path_under_v1beta_is_a_404_in_googles_shape_and_nothing_forwarded(
    home: Path, gateway: Gateway, upstream: GeminiUpstream, path: str
) -> None:
    record(home, upstream.base_url)
    status, _, body = call(gateway, path, {"x-goog-api-key": model_token(home, SANDBOX)})
    assert status == 404
    assert json.loads(body)["error"]["status"] == "NOT_FOUND"
    assert upstream.seen == []


def test_no_valid_token_is_a_401_in_googles_shape(
    home: Path, gateway: Gateway, upstream: GeminiUpstream
) -> None:
    record(home, upstream.base_url)
    target = f"/model/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    for headers in ({}, {"x-goog-api-key": model_token(home, SANDBOX)[:-4] + "0000"}):
        status, _, body = call(gateway, target, headers)
        assert status == 401
        error = json.loads(body)["error"]
        assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
        assert error["message"].startswith("overnight gateway: no valid model token")
    assert upstream.seen == []


def test_count_tokens_is_forwarded_and_neither_booked_nor_counted_as_a_repeat(
    home: Path, gateway: Gateway, upstream: GeminiUpstream
) -> None:
    upstream.replies.append(Reply(body={"totalTokens": 31}))
    record(home, upstream.base_url)
    status, _, body = call(
        gateway,
        f"/model/v1beta/models/{MODEL}:countTokens",
        {"x-goog-api-key": model_token(home, SANDBOX)},
    )
    assert status == 200 and json.loads(body) == {"totalTokens": 31}
    assert upstream.seen[0].path == f"/v1beta/models/{MODEL}:countTokens"
    assert spend_of(home, RUN) == (0.0, 0)
    gateway.model_book.flush()
    assert model_stats_of(home, RUN).get("repeats", 0) == 0


def test_a_503_is_tried_again_after_googles_retry_delay_and_the_caller_gets_one_answer(
    home: Path, gateway: Gateway, upstream: GeminiUpstream
) -> None:
    retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}
    upstream.replies.extend([google_error(503, "UNAVAILABLE", retry), streamed()])
    record(home, upstream.base_url)

    status, _, body = call(
        gateway,
        f"/model/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        {"x-goog-api-key": model_token(home, SANDBOX)},
    )

    assert status == 200 and body.count(b"data: ") == 3
    assert len(upstream.seen) == 2
    assert spend_of(home, RUN) == (pytest.approx(USD, abs=1e-12), 1)
    gateway.model_book.flush()
    stats = model_stats_of(home, RUN)
    assert stats["retries"] == 1 and stats["last_upstream_error"].startswith("503")


def test_a_run_at_its_cap_is_refused_at_once_in_googles_shape_and_nothing_forwarded(
    home: Path, gateway: Gateway, upstream: GeminiUpstream
) -> None:
    upstream.replies.extend([streamed(), streamed()])
    record(home, upstream.base_url, cap=0.05)
    target = f"/model/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    headers = {"x-goog-api-key": model_token(home, SANDBOX)}
    assert call(gateway, target, headers)[0] == 200  # under the cap: served ($0.0875)

    status, answered, body = call(gateway, target, headers)

    assert status == 429
    assert answered["retry-after"] == "60" and answered["x-should-retry"] == "false"
    error = json.loads(body)["error"]
    assert error["code"] == 429 and error["status"] == "RESOURCE_EXHAUSTED"
    assert "cap" in error["message"] and "$0.09 of $0.05" in error["message"]
    assert len(upstream.seen) == 1
    gateway.model_book.flush()
    assert model_stats_of(home, RUN)["cap_refusals"] == 1
    record(home, upstream.base_url, cap=5.0)  # a cap raised lets the next request through
    assert call(gateway, target, headers)[0] == 200
