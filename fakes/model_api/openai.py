"""Turns as OpenAI Responses answers (`POST /v1/responses`): pure rendering.

The stream is the smallest one Codex accepts: `response.created`, then per output item
`response.output_item.added` and `response.output_item.done` (a `message` with one
`output_text`; a `function_call` with `call_id`, `name` and `arguments` as a JSON string; a
`custom_tool_call` with `input`, which is how Codex's `apply_patch` is called), then
`response.completed` with the usage.

Asked for a whole answer (`streamed=False`), the completed response is one JSON body. A turn's
cache tokens count in `input_tokens`, the reads also as `input_tokens_details.cached_tokens`.

Errors are `{"error": {"type", "code", "message"}}`. A usage limit is a 429
`usage_limit_reached` whose body carries `resets_at` / `resets_in_seconds`, with the
`x-codex-primary-*` headers (`-used-percent`, `-window-minutes`, `-reset-at`; `secondary` for
the weekly window) that Codex records in its rollout's `rate_limits`.
"""

from __future__ import annotations

import json
from typing import Any

from fakes.model_api.reply import JSON_HEADERS, STREAM_HEADERS, Reply, json_body, sse
from fakes.model_api.turns import Answer, ApiError, Text, ToolCall, ToolCalls, UsageLimit

WINDOWS = {"five_hour": ("primary", 300), "seven_day": ("secondary", 10080)}


def render(
    turn: Answer,
    number: int,
    model: str,
    now: float,
    *,
    streamed: bool = True,
    include_usage: bool = False,
) -> Reply:
    headers = {"x-request-id": f"req_fake_{number:04d}"}
    if isinstance(turn, ApiError):
        return _error(turn, headers)
    if isinstance(turn, UsageLimit):
        return _usage_limit(turn, headers, now)
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append(
            {
                "type": "message",
                "id": f"msg_fake_{number:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    call_ids: list[str] = []
    if isinstance(turn, ToolCalls):
        for position, call in enumerate(turn.calls):
            tool = call.for_api("openai")
            call_id = f"call_fake_{number:04d}_{position}"
            call_ids.append(call_id)
            items.append(_call_item(tool, call_id))
    response_id = f"resp_fake_{number:04d}"
    if not streamed:
        whole = _response(response_id, model, now) | {
            "status": "completed",
            "output": items,
            "usage": usage_of(turn),
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
        events=tuple(_stream(response_id, model, items, turn, now)),
        delay_seconds=turn.delay_seconds,
        cut_after=turn.cut_after,
        hold_open=turn.hold_open,
        call_ids=tuple(call_ids),
    )


def _call_item(tool: ToolCall, call_id: str) -> dict[str, Any]:
    if tool.search:
        return {
            "type": "tool_search_call",
            "id": "ts_" + call_id,
            "call_id": call_id,
            "execution": "client",
            "arguments": dict(tool.arguments),
            "status": "completed",
        }
    if tool.custom:
        return {
            "type": "custom_tool_call",
            "id": "ctc_" + call_id,
            "call_id": call_id,
            "name": tool.name,
            "input": str(tool.arguments.get("input", "")),
            "status": "completed",
        }
    item = {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        "name": tool.name,
        "arguments": json.dumps(tool.arguments),
        "status": "completed",
    }
    if tool.namespace:
        item["namespace"] = tool.namespace
    return item


def _stream(
    response_id: str, model: str, items: list[dict[str, Any]], turn: ToolCalls | Text, now: float
) -> list[bytes]:
    response = _response(response_id, model, now)
    sequence = 0

    def event(kind: str, **data: Any) -> bytes:
        nonlocal sequence
        sequence += 1
        return sse(kind, {"type": kind, "sequence_number": sequence} | data)

    events = [event("response.created", response=response)]
    for index, item in enumerate(items):
        events.append(event("response.output_item.added", output_index=index, item=item))
        events.append(event("response.output_item.done", output_index=index, item=item))
    completed = response | {"status": "completed", "output": items, "usage": usage_of(turn)}
    events.append(event("response.completed", response=completed))
    return events


def _response(response_id: str, model: str, now: float) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(now),
        "status": "in_progress",
        "model": model or "gpt-fake",
        "output": [],
    }


def usage_of(turn: ToolCalls | Text) -> dict[str, Any]:
    """A turn's usage as the Responses API says it (cache tokens inside `input_tokens`)."""
    inputs = turn.input_tokens + turn.cache_read_tokens + turn.cache_write_tokens
    return {
        "input_tokens": inputs,
        "input_tokens_details": {"cached_tokens": turn.cache_read_tokens},
        "output_tokens": turn.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inputs + turn.output_tokens,
    }


def _error(turn: ApiError, headers: dict[str, str]) -> Reply:
    body = turn.body or {
        "error": {"type": turn.code, "code": turn.code, "message": turn.message, "param": None}
    }
    return Reply(
        turn.status,
        JSON_HEADERS | headers | dict(turn.headers),
        body=json_body(body),
        delay_seconds=turn.delay_seconds,
    )


def _usage_limit(turn: UsageLimit, headers: dict[str, str], now: float) -> Reply:
    name, minutes = WINDOWS[turn.window]
    resets_at = turn.reset_epoch(now)
    limit_headers = {
        f"x-codex-{name}-used-percent": "100.0",
        f"x-codex-{name}-window-minutes": str(minutes),
        f"x-codex-{name}-reset-at": str(resets_at),
    }
    body = {
        "error": {
            "type": "usage_limit_reached",
            "message": "The usage limit has been reached",
            "plan_type": "plus",
            "resets_at": resets_at,
            "resets_in_seconds": max(0, int(resets_at - now)),
        }
    }
    return Reply(
        429,
        JSON_HEADERS | headers | limit_headers | dict(turn.headers),
        body=json_body(body),
        delay_seconds=turn.delay_seconds,
    )
