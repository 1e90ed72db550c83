"""Turns as Anthropic Messages answers (`POST /v1/messages`): pure rendering.

The stream is the smallest one Claude Code accepts (no ping): `message_start` (with usage),
per block `content_block_start` / one delta / `content_block_stop` (a `text` block with a
`text_delta`, or a `tool_use` block with one `input_json_delta` holding the whole input),
`message_delta` (`stop_reason` `tool_use` or `end_turn`, output tokens), `message_stop`.

Asked for a whole answer (`streamed=False`: the request said `"stream": false` to a fake that
honours it), the message is one JSON body with its `usage`. A turn's cache tokens are in the
usage as `cache_creation_input_tokens` / `cache_read_input_tokens` when not zero.

Errors are `{"type": "error", "error": {"type", "message"}}` with a `request-id` header. A
usage limit is Anthropic's subscription answer: a 429 `rate_limit_error` with the
`anthropic-ratelimit-unified-*` headers (`status: rejected`, `reset`, `representative-claim`);
Claude Code reads these headers (and only these: the body says nothing of the window) into its
`rate_limit_event` line and its "You've hit your 5-hour limit" result.
"""

from __future__ import annotations

import json
import time
from typing import Any

from fakes.model_api.reply import JSON_HEADERS, STREAM_HEADERS, Reply, json_body, sse
from fakes.model_api.turns import Answer, ApiError, Text, ToolCalls, UsageLimit

WINDOW_HEADER = {"five_hour": "5h", "seven_day": "7d"}


def render(
    turn: Answer,
    number: int,
    model: str,
    now: float,
    *,
    streamed: bool = True,
    include_usage: bool = False,
) -> Reply:
    headers = {"request-id": f"req_fake_{number:04d}"}
    if isinstance(turn, ApiError):
        return _error(turn, headers)
    if isinstance(turn, UsageLimit):
        return _usage_limit(turn, headers)
    blocks: list[dict[str, Any]] = []
    call_ids: list[str] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    if isinstance(turn, ToolCalls):
        for position, call in enumerate(turn.calls):
            tool = call.for_api("anthropic")
            call_id = f"toolu_fake_{number:04d}_{position}"
            call_ids.append(call_id)
            blocks.append(
                {"type": "tool_use", "id": call_id, "name": tool.name, "input": tool.arguments}
            )
    stop_reason = "tool_use" if isinstance(turn, ToolCalls) else "end_turn"
    message_id = f"msg_fake_{number:04d}"
    if not streamed:
        whole = _message(message_id, model, turn) | {
            "content": blocks,
            "stop_reason": stop_reason,
            "usage": _usage(turn) | {"output_tokens": turn.output_tokens},
        }
        return Reply(
            200,
            JSON_HEADERS | headers | dict(turn.headers),
            body=json_body(whole),
            delay_seconds=turn.delay_seconds,
            call_ids=tuple(call_ids),
        )
    return Reply(
        200,
        STREAM_HEADERS | headers | dict(turn.headers),
        events=tuple(_stream(message_id, model, blocks, stop_reason, turn)),
        delay_seconds=turn.delay_seconds,
        cut_after=turn.cut_after,
        hold_open=turn.hold_open,
        call_ids=tuple(call_ids),
    )


def _stream(
    message_id: str,
    model: str,
    blocks: list[dict[str, Any]],
    stop_reason: str,
    turn: ToolCalls | Text,
) -> list[bytes]:
    message = _message(message_id, model, turn)
    events = [sse("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(blocks):
        start: dict[str, Any]
        delta: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            ),
            sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            ),
            sse("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    events += [
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": turn.output_tokens},
            },
        ),
        sse("message_stop", {"type": "message_stop"}),
    ]
    return events


def _message(message_id: str, model: str, turn: ToolCalls | Text) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model or "claude-fake",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": _usage(turn),
    }


def _usage(turn: ToolCalls | Text) -> dict[str, int]:
    usage = {"input_tokens": turn.input_tokens, "output_tokens": 1}
    if turn.cache_write_tokens:
        usage["cache_creation_input_tokens"] = turn.cache_write_tokens
    if turn.cache_read_tokens:
        usage["cache_read_input_tokens"] = turn.cache_read_tokens
    return usage


def _error(turn: ApiError, headers: dict[str, str]) -> Reply:
    body = turn.body or {"type": "error", "error": {"type": turn.code, "message": turn.message}}
    return Reply(
        turn.status,
        JSON_HEADERS | headers | dict(turn.headers),
        body=json_body(body),
        delay_seconds=turn.delay_seconds,
    )


def _usage_limit(turn: UsageLimit, headers: dict[str, str]) -> Reply:
    short = WINDOW_HEADER[turn.window]
    resets_at = turn.reset_epoch(time.time())
    limit_headers = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(resets_at),
        "anthropic-ratelimit-unified-representative-claim": turn.window,
        f"anthropic-ratelimit-unified-{short}-status": "rejected",
        f"anthropic-ratelimit-unified-{short}-reset": str(resets_at),
        f"anthropic-ratelimit-unified-{short}-utilization": "1.0",
        "anthropic-ratelimit-unified-overage-status": "rejected",
        "anthropic-ratelimit-unified-overage-disabled-reason": "org_level_disabled",
    }
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. "
            "Please try again later.",
        },
    }
    return Reply(
        429,
        JSON_HEADERS | headers | limit_headers | dict(turn.headers),
        body=json_body(body),
        delay_seconds=turn.delay_seconds,
    )
