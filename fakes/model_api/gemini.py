"""Turns as Gemini API answers (generativelanguage `v1beta`, Gemini CLI): pure rendering.

`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` is answered with Server-Sent
Events, each one `data:` line holding a whole `GenerateContentResponse`: one chunk per part
(the text, then each `functionCall {id, name, args}`), the last with `finishReason: STOP` and
the `usageMetadata`. Without `alt=sse` the same chunks come as one JSON array;
`:generateContent` gets one `GenerateContentResponse` with every part. Each chunk carries
`modelVersion` and `responseId`. Usage: `promptTokenCount` counts the turn's cache tokens
too, the reads also as `cachedContentTokenCount` (left out when 0, as the API leaves out
zeros); `candidatesTokenCount` is its output. A call's `id` (which the API may leave out) is
given so the tool results can be matched: Gemini CLI sends it back as its `functionResponse`'s.

Errors are Google's `{"error": {"code", "message", "status"}}` (`status` the gRPC name:
429 `RESOURCE_EXHAUSTED`, 500 `INTERNAL`, 503 `UNAVAILABLE`, ...; a turn's `code` in capitals
is taken as that name). A 429 whose turn says `retry-after` carries a `RetryInfo` detail, which
Gemini CLI waits on. A usage limit is the daily quota spent: a 429 `RESOURCE_EXHAUSTED` with a
`QuotaFailure` on a `...PerDay...` quota and a `RetryInfo` until the reset, which Gemini CLI
does not retry ("You have exhausted your daily quota on this model.").
"""

from __future__ import annotations

import json
from typing import Any

from fakes.model_api.reply import JSON_HEADERS, STREAM_HEADERS, Reply, json_body
from fakes.model_api.turns import Answer, ApiError, Text, ToolCalls, UsageLimit

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
RPC = "type.googleapis.com/google.rpc."
DAILY_QUOTA = "GenerateRequestsPerDayPerProjectPerModel"


def render(
    turn: Answer,
    number: int,
    model: str,
    now: float,
    *,
    streamed: bool = True,
    include_usage: bool = False,
    sse: bool = True,
) -> Reply:
    """`streamed`: the `:streamGenerateContent` method (`sse`: asked with `alt=sse`)."""
    headers = {"x-request-id": f"req_fake_{number:04d}"}
    if isinstance(turn, ApiError):
        return _error(turn, headers)
    if isinstance(turn, UsageLimit):
        return _usage_limit(turn, headers, model, now)
    parts: list[dict[str, Any]] = []
    if turn.text:
        parts.append({"text": turn.text})
    call_ids: list[str] = []
    if isinstance(turn, ToolCalls):
        for position, call in enumerate(turn.calls):
            tool = call.for_api("gemini")
            call_id = f"call_fake_{number:04d}_{position}"
            call_ids.append(call_id)
            parts.append(
                {"functionCall": {"id": call_id, "name": tool.name, "args": dict(tool.arguments)}}
            )
    if not parts:  # an empty answer is still one text part
        parts.append({"text": ""})
    base = {"modelVersion": model or "gemini-fake", "responseId": f"resp_fake_{number:04d}"}
    # Streamed: a chunk per part, the last one finishing; whole: one response with them all.
    chunks = [_response([part], base, finished=n == len(parts) - 1) for n, part in enumerate(parts)]
    chunks[-1]["usageMetadata"] = usage_of(turn)
    if streamed and sse:
        return Reply(
            200,
            STREAM_HEADERS | headers | dict(turn.headers),
            events=tuple(_data(chunk) for chunk in chunks),
            delay_seconds=turn.delay_seconds,
            cut_after=turn.cut_after,
            hold_open=turn.hold_open,
            call_ids=tuple(call_ids),
        )
    whole: Any = chunks  # `:streamGenerateContent` without `alt=sse`: a JSON array
    if not streamed:
        whole = _response(parts, base, finished=True) | {"usageMetadata": usage_of(turn)}
    return Reply(
        200,
        JSON_HEADERS | headers | dict(turn.headers),
        body=json_body(whole),
        delay_seconds=turn.delay_seconds,
        call_ids=tuple(call_ids),
    )


def _response(
    parts: list[dict[str, Any]], base: dict[str, Any], *, finished: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finished:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate]} | base


def usage_of(turn: ToolCalls | Text) -> dict[str, int]:
    """A turn's usage as the Gemini API says it (cache tokens inside `promptTokenCount`)."""
    prompt = turn.input_tokens + turn.cache_read_tokens + turn.cache_write_tokens
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": turn.output_tokens,
        "totalTokenCount": prompt + turn.output_tokens,
    }
    if turn.cache_read_tokens:
        usage["cachedContentTokenCount"] = turn.cache_read_tokens
    return usage


def status_name(turn: ApiError) -> str:
    if turn.code.isupper():
        return turn.code
    if turn.status in STATUS_NAMES:
        return STATUS_NAMES[turn.status]
    return "UNAVAILABLE" if turn.status >= 500 else "FAILED_PRECONDITION"


def _error(turn: ApiError, headers: dict[str, str]) -> Reply:
    error: dict[str, Any] = {
        "code": turn.status,
        "message": turn.message,
        "status": status_name(turn),
    }
    retry_after = {name.lower(): value for name, value in turn.headers.items()}.get("retry-after")
    if turn.status == 429 and retry_after:
        error["details"] = [{"@type": RPC + "RetryInfo", "retryDelay": f"{retry_after}s"}]
    return Reply(
        turn.status,
        JSON_HEADERS | headers | dict(turn.headers),
        body=json_body(turn.body or {"error": error}),
        delay_seconds=turn.delay_seconds,
    )


def _usage_limit(turn: UsageLimit, headers: dict[str, str], model: str, now: float) -> Reply:
    wait = max(0, turn.reset_epoch(now) - int(now))
    model = model or "gemini-fake"
    message = (
        "You exceeded your current quota, please check your plan and billing details.\n"
        "* Quota exceeded for metric: generativelanguage.googleapis.com/"
        f"generate_content_requests, limit: 250, model: {model}\n"
        f"Please retry in {wait}s."
    )
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
        "quotaId": DAILY_QUOTA,
        "quotaDimensions": {"location": "global", "model": model},
        "quotaValue": "250",
    }
    error = {
        "code": 429,
        "message": message,
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": RPC + "QuotaFailure", "violations": [violation]},
            {"@type": RPC + "RetryInfo", "retryDelay": f"{wait}s"},
        ],
    }
    return Reply(
        429,
        JSON_HEADERS | headers | dict(turn.headers),
        body=json_body({"error": error}),
        delay_seconds=turn.delay_seconds,
    )


def _data(value: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(value, separators=(",", ":")).encode() + b"\r\n\r\n"
