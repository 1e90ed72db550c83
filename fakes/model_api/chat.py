"""Turns as OpenAI Chat Completions answers (`POST /v1/chat/completions`): pure rendering.

Streamed: `chat.completion.chunk` events as `data:` lines (no event names): the role and
text, one chunk per tool call (`tool_calls` with the whole `arguments`), the chunk with the
`finish_reason` (`tool_calls` or `stop`), then, when the request asked for it
(`stream_options.include_usage`), one chunk with empty `choices` and the `usage`, then
`data: [DONE]`. Whole: one `chat.completion` with the `usage`. Usage counts the turn's cache
tokens in `prompt_tokens`, the reads also as `prompt_tokens_details.cached_tokens`.

Errors and usage limits are rendered as for the Responses API (openai.py).
"""

from __future__ import annotations

import json
from typing import Any

from fakes.model_api import openai
from fakes.model_api.reply import JSON_HEADERS, STREAM_HEADERS, Reply, json_body
from fakes.model_api.turns import Answer, ApiError, Text, ToolCalls, UsageLimit


def render(
    turn: Answer,
    number: int,
    model: str,
    now: float,
    *,
    streamed: bool = True,
    include_usage: bool = False,
) -> Reply:
    if isinstance(turn, ApiError | UsageLimit):
        return openai.render(turn, number, model, now)
    headers = {"x-request-id": f"req_fake_{number:04d}"}
    answer_id = f"chatcmpl-fake-{number:04d}"
    calls: list[dict[str, Any]] = []
    if isinstance(turn, ToolCalls):
        for position, call in enumerate(turn.calls):
            tool = call.for_api("chat")
            calls.append(
                {
                    "id": f"call_fake_{number:04d}_{position}",
                    "type": "function",
                    "function": {"name": tool.name, "arguments": json.dumps(tool.arguments)},
                }
            )
    finish = "tool_calls" if calls else "stop"
    base = {"id": answer_id, "created": int(now), "model": model or "gpt-fake"}
    call_ids = tuple(call["id"] for call in calls)
    if not streamed:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if calls:
            message["tool_calls"] = calls
        whole = base | {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(turn),
        }
        return Reply(
            200,
            JSON_HEADERS | headers | dict(turn.headers),
            body=json_body(whole),
            delay_seconds=turn.delay_seconds,
            call_ids=call_ids,
        )
    chunk = base | {"object": "chat.completion.chunk"}
    empty_usage = {"usage": None} if include_usage else {}

    def choice(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        value = chunk | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        return _data(value | empty_usage)

    events = [choice({"role": "assistant", "content": turn.text or ""})]
    for index, made in enumerate(calls):
        events.append(choice({"tool_calls": [{"index": index, **made}]}))
    events.append(choice({}, finish))
    if include_usage:
        events.append(_data(chunk | {"choices": [], "usage": _usage(turn)}))
    events.append(b"data: [DONE]\n\n")
    return Reply(
        200,
        STREAM_HEADERS | headers | dict(turn.headers),
        events=tuple(events),
        delay_seconds=turn.delay_seconds,
        cut_after=turn.cut_after,
        hold_open=turn.hold_open,
        call_ids=call_ids,
    )


def _usage(turn: ToolCalls | Text) -> dict[str, Any]:
    prompt = turn.input_tokens + turn.cache_read_tokens + turn.cache_write_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": turn.output_tokens,
        "total_tokens": prompt + turn.output_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cache_read_tokens},
    }


def _data(value: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(value, separators=(",", ":")).encode() + b"\n\n"
