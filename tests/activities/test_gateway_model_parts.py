"""The model routes' pure parts: usage read from answers, the retry policy, the refusal
shapes, the model token, the record's `model` entry, the upstream's URL."""

from __future__ import annotations

import json

import pytest

from activities.gateway.model_forward import target_of
from activities.gateway.model_origin import ModelOrigin, model_origin_of
from activities.gateway.model_policy import (
    MAX_WAIT_SECONDS,
    RETRY_BUDGET_SECONDS,
    cap_reached,
    retry_wait,
)
from activities.gateway.model_usage import SseEvents, UsageReader, ask_for_usage
from activities.gateway.tokens import model_token_for, model_token_owner, token_for
from overnight.core.model_prices import Usage

KEY = b"k" * 32


def sse(kind: str, value: dict[str, object]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(value)}\n\n".encode()


def read_stream(api: str, stream: bytes, cut: int = 7) -> UsageReader:
    """Fed in pieces of `cut` bytes, as a stream comes."""
    reader = UsageReader(api)  # type: ignore[arg-type]
    events = SseEvents()
    for start in range(0, len(stream), cut):
        for data in events.feed(stream[start : start + cut]):
            reader.event(data)
    return reader


def test_an_anthropic_stream_counts_cache_writes_reads_and_the_final_output() -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "model": "claude-opus-4-8",
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": 300,
                "cache_read_input_tokens": 4000,
                "cache_creation": {"ephemeral_1h_input_tokens": 100},
                "output_tokens": 1,
            },
        },
    }
    delta = {"type": "content_block_delta", "delta": {"text": 'the "usage" word in text'}}
    end = {"type": "message_delta", "usage": {"output_tokens": 77}}
    stream = sse("message_start", start) + sse("content_block_delta", delta)
    stream += sse("message_delta", end).replace(b"\n", b"\r\n") + sse("message_stop", {})
    reader = read_stream("anthropic", stream)
    assert (reader.model, reader.answer_id) == ("claude-opus-4-8", "msg_1")
    assert reader.usage() == Usage(
        input_tokens=10,
        output_tokens=77,
        cache_read_tokens=4000,
        cache_write_tokens=200,
        cache_write_1h_tokens=100,
    )


def test_a_responses_stream_counts_cached_tokens_apart_from_the_input() -> None:
    completed = {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "model": "gpt-5",
            "usage": {
                "input_tokens": 1000,
                "input_tokens_details": {"cached_tokens": 600},
                "output_tokens": 50,
            },
        },
    }
    created = {"type": "response.created", "response": {"id": "resp_1", "usage": None}}
    stream = sse("response.created", created) + sse("response.completed", completed)
    assert read_stream("responses", stream).usage() == Usage(
        input_tokens=400, output_tokens=50, cache_read_tokens=600
    )


def test_a_chat_stream_takes_its_usage_chunk_and_a_whole_answer_its_usage() -> None:
    usage = {
        "prompt_tokens": 90,
        "completion_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 80},
    }
    chunk = {"id": "c1", "model": "gpt-5-mini", "choices": [], "usage": usage}
    stream = b'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}\n\n'
    stream += b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"
    expected = Usage(input_tokens=10, output_tokens=9, cache_read_tokens=80)
    assert read_stream("chat", stream).usage() == expected
    whole = UsageReader("chat")
    whole.body(json.dumps(chunk).encode())
    assert whole.usage() == expected and whole.model == "gpt-5-mini"


def test_an_answer_that_says_no_usage_has_none() -> None:
    assert read_stream("anthropic", sse("ping", {"type": "ping"})).usage() is None
    reader = UsageReader("responses")
    reader.body(b"not json")
    assert reader.usage() is None


def test_a_streamed_chat_request_is_made_to_ask_for_its_usage() -> None:
    body: dict[str, object] = {"stream": True, "stream_options": {"include_usage": False, "x": 1}}
    assert ask_for_usage(body) and body["stream_options"] == {"include_usage": True, "x": 1}
    assert not ask_for_usage(body)
    assert not ask_for_usage({"stream": False})


@pytest.mark.parametrize(
    ("status", "headers", "body", "expected"),
    [
        (529, {}, b"", 1.0),
        (503, {}, b"", 1.0),
        (429, {"retry-after": "7"}, b"", 7.0),
        (429, {"retry-after-ms": "250"}, b"", 0.25),
        (429, {"retry-after": "900"}, b"", MAX_WAIT_SECONDS),
        (None, {}, b"", 1.0),
        (500, {}, b"", None),
        (200, {}, b"", None),
        (529, {"x-should-retry": "false"}, b"", None),
        (429, {"anthropic-ratelimit-unified-status": "rejected"}, b"", None),
        (429, {}, b'{"error": {"type": "usage_limit_reached"}}', None),
        (429, {}, b'{"error": {"code": "insufficient_quota"}}', None),
    ],
)
def test_which_upstream_answers_the_gateway_tries_again(
    status: int | None, headers: dict[str, str], body: bytes, expected: float | None
) -> None:
    assert retry_wait(status, headers, body, attempt=1, waited=0.0) == expected


def test_retries_back_off_and_stop_at_the_budget() -> None:
    assert [retry_wait(529, {}, b"", n, 0.0) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert retry_wait(529, {}, b"", 1, RETRY_BUDGET_SECONDS - 0.5) is None
    date = "Wed, 21 Oct 2026 07:28:10 GMT"
    now = 1792567680.0  # 10 s before that date
    assert retry_wait(429, {"retry-after": date}, b"", 1, 0.0, now=now) == pytest.approx(10.0)


def test_the_cap_refusal_is_each_vendors_rate_limit_shape_with_no_retry() -> None:
    status, headers, body = cap_reached("anthropic", 5.01, 5.0)
    assert status == 429 and ("x-should-retry", "false") in headers
    assert json.loads(body)["error"]["type"] == "rate_limit_error"
    assert "$5.01 of $5.00" in json.loads(body)["error"]["message"]
    status, headers, body = cap_reached("chat", 1.0, 1.0)
    assert json.loads(body)["error"]["code"] == "insufficient_quota"


def test_a_model_token_names_its_sandbox_and_only_the_host_key_makes_one() -> None:
    token = model_token_for(KEY, "run-a-b-3")
    assert token.startswith("ovn-run-a-b-3-") and len(token.rpartition("-")[2]) == 32
    assert model_token_owner(KEY, token) == "run-a-b-3"
    assert model_token_owner(b"x" * 32, token) is None
    assert model_token_owner(KEY, token.replace("run-a-b-3", "run-a-b-4")) is None
    assert model_token_owner(KEY, token_for(KEY, "run-a-b-3")) is None  # a proxy token
    assert model_token_owner(KEY, "") is None and model_token_owner(KEY, "ovn--") is None


def test_the_records_model_entry_is_read_strictly() -> None:
    good = {"upstream": "https://api.anthropic.com", "credential_env": "K", "run_id": "r-1"}
    assert model_origin_of(good | {"cap_usd": 2}) == ModelOrigin(
        "https://api.anthropic.com", "K", "r-1", 2.0
    )
    assert model_origin_of(good) == ModelOrigin("https://api.anthropic.com", "K", "r-1", None)
    for bad in (
        good | {"run_id": "../x"},
        good | {"upstream": "file:///etc"},
        good | {"credential_env": "A B"},
        good | {"cap_usd": "1"},
        good | {"cap_usd": float("nan")},
        good | {"cap_usd": True},
        "x",
        None,
    ):
        assert model_origin_of(bad) is None, bad


def test_the_vendor_path_goes_under_the_upstreams_base() -> None:
    assert target_of("https://api.openai.com/v1", "/v1/responses", "") == target_of(
        "https://api.openai.com", "/v1/responses", ""
    )
    made = target_of("http://127.0.0.1:9/gw/v1/", "/v1/messages", "beta=true")
    assert (made.host, made.port, made.tls, made.path) == (
        "127.0.0.1",
        9,
        False,
        "/gw/v1/messages?beta=true",
    )
    assert target_of("https://api.anthropic.com", "/v1/messages", "").host_header == (
        "api.anthropic.com"
    )
