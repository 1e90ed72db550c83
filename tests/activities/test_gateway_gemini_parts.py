"""The gateway's Gemini API parts, pure: usageMetadata read from a stream's chunks and from a
whole answer, the routes' paths and query, Google's errors retried or not. End to end:
test_gateway_gemini.py."""

from __future__ import annotations

import json
from typing import Any

from activities.gateway import model_gemini, model_policy
from activities.gateway.model_usage import SseEvents, UsageReader, usage_needle
from overnight.core.model_prices import Usage


def test_the_last_usage_metadata_of_a_stream_stands_whole() -> None:
    reader = UsageReader("generate_content")
    events = SseEvents(usage_needle("generate_content"))
    first = {"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 7}}
    last = {
        "usageMetadata": {
            "promptTokenCount": 10,
            "cachedContentTokenCount": 4,
            "toolUsePromptTokenCount": 3,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 6,
            "totalTokenCount": 24,
        },
        "modelVersion": "gemini-2.5-flash",
    }
    stream = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in (first, last))
    for data in events.feed(stream[:17]) + events.feed(stream[17:]):
        reader.event(data)
    # 6 fresh + 3 of a tool's prompt in, 4 read from the cache, 5 + 6 thinking out: 24 in all.
    assert reader.usage() == Usage(input_tokens=9, output_tokens=11, cache_read_tokens=4)
    assert reader.model == "gemini-2.5-flash"


def test_a_whole_answer_or_a_json_array_stream_is_read_and_none_says_no_usage() -> None:
    chunk = {"usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 2}}
    for body in (chunk, [{"usageMetadata": {"promptTokenCount": 8}}, chunk]):
        reader = UsageReader("generate_content")
        reader.body(json.dumps(body).encode())
        assert reader.usage() == Usage(input_tokens=8, output_tokens=2)
    reader = UsageReader("generate_content")
    reader.body(b'{"totalTokens": 31}')
    assert reader.usage() is None


def test_only_alt_goes_upstream_and_the_query_key_is_a_token() -> None:
    assert model_gemini.forwarded_query("alt=sse&key=secret&prettyPrint=false") == "alt=sse"
    assert model_gemini.forwarded_query("key=secret") == ""
    assert model_gemini.query_token("alt=sse&key=ovn-x-1") == "ovn-x-1"
    request = model_gemini.gemini_request(
        "/model/v1beta/models/gemini-2.5-flash:generateContent", "key=k", {}, b"{}"
    )
    assert request is not None and request.model == "gemini-2.5-flash" and request.query == ""
    assert model_gemini.gemini_request("/model/v1/messages", "", {}, b"") is None


def test_googles_per_day_quota_is_not_retried_and_its_retry_delay_is_the_wait() -> None:
    day = {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
    }
    minute = {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}],
    }
    retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}

    def body(*details: dict[str, Any]) -> bytes:
        error = {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": list(details)}
        return json.dumps({"error": error}).encode()

    assert model_policy.retry_wait(429, {}, body(day, retry), 1, 0.0) is None
    assert model_policy.retry_wait(429, {}, body(minute, retry), 1, 0.0) == 7.0
    assert model_policy.retry_wait(429, {"retry-after": "2"}, body(retry), 1, 0.0) == 2.0
    assert model_policy.retry_wait(503, {}, body(), 2, 0.0) == 2.0
