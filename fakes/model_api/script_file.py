"""A script written as JSON (for `python -m fakes.model_api --script FILE` and the demo).

    {"turns": [
      {"tools": [{"write": {"path": "notes.txt", "content": "hello\\n"}},
                 {"shell": "wc -c notes.txt"}, {"read": "notes.txt"}]},
      {"overloaded": true, "times": 2},
      {"rate_limited": {"retry_after": 1}},
      {"usage_limit": {"resets_in_seconds": 18000, "window": "five_hour"}},
      {"error": {"status": 400, "code": "invalid_request_error", "message": "no"}},
      {"text": "done", "when": "after_tool_result"}
    ]}

A turn is one of `tools` (a list of `shell`, `write`, `read`, or `tool` with `name` and
`arguments`; a `text` may go with them), `text`, `error`, `overloaded`, `rate_limited`,
`server_error`, `usage_limit` (`resets_at` epoch seconds, or `resets_in_seconds` from when the
script is read); each may carry `delay_seconds`, `headers`, `cut_after`, `hold_open`, `times`,
`label`, `input_tokens`, `output_tokens`, `cache_read_tokens`, `cache_write_tokens` and
`when` (`"after_tool_result"`, or `{"carries": TEXT}`). A top-level list is the turns alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from fakes.model_api import turns as t
from fakes.model_api.script import Script, after_tool_result, carries

COMMON = (
    "delay_seconds",
    "headers",
    "cut_after",
    "hold_open",
    "times",
    "label",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
KINDS = ("tools", "text", "error", "overloaded", "rate_limited", "server_error", "usage_limit")


def load_script(path: Path, now: float | None = None) -> Script:
    return parse_script(json.loads(path.read_text(encoding="utf-8")), now)


def parse_script(document: Any, now: float | None = None) -> Script:
    entries = document.get("turns") if isinstance(document, dict) else document
    if not isinstance(entries, list):
        raise ValueError('a script is a list of turns, or {"turns": [...]}')
    clock = time.time() if now is None else now
    return Script([parse_turn(entry, clock) for entry in entries])


def parse_turn(entry: Any, now: float) -> t.Answer:
    if not isinstance(entry, dict):
        raise ValueError(f"a turn is an object: {entry!r}")
    kinds = [kind for kind in KINDS if kind in entry]
    if "tools" in kinds and "text" in kinds:
        kinds.remove("text")  # the text said before the calls
    if len(kinds) != 1:
        raise ValueError(f"a turn is exactly one of {', '.join(KINDS)}: {entry!r}")
    unknown = set(entry) - set(KINDS) - set(COMMON) - {"when"}
    if unknown:
        raise ValueError(f"unknown fields in a turn: {', '.join(sorted(unknown))}")
    options: dict[str, Any] = {name: entry[name] for name in COMMON if name in entry}
    if "when" in entry:
        options["when"] = _predicate(entry["when"])
    kind = kinds[0]
    value = entry[kind]
    if kind == "tools":
        return t.tools(*[_call(call) for call in value], text=entry.get("text", ""), **options)
    if kind == "text":
        return t.text(str(value), **options)
    if kind == "overloaded":
        return t.overloaded(**options)
    if kind == "server_error":
        return t.server_error(**options)
    if kind == "rate_limited":
        retry_after = value.get("retry_after") if isinstance(value, dict) else None
        return t.rate_limited(retry_after, **options)
    if kind == "usage_limit":
        resets_at = value.get("resets_at")
        if resets_at is None:
            resets_at = now + float(value.get("resets_in_seconds", 5 * 3600))
        return t.usage_limit(resets_at, value.get("window", "five_hour"), **options)
    return t.ApiError(
        status=int(value["status"]),
        code=str(value.get("code", "api_error")),
        message=str(value.get("message", "")),
        body=value.get("body"),
        **options,
    )


def _call(value: Any) -> t.Call:
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError(f"a call is one of shell, write, read, tool: {value!r}")
    ((kind, spec),) = value.items()
    if kind == "shell":
        return t.Shell(str(spec))
    if kind == "read":
        return t.ReadFile(str(spec))
    if kind == "write":
        return t.WriteFile(str(spec["path"]), str(spec["content"]))
    if kind == "tool":
        return t.ToolCall(
            str(spec["name"]), dict(spec.get("arguments", {})), bool(spec.get("custom"))
        )
    raise ValueError(f"a call is one of shell, write, read, tool: {value!r}")


def _predicate(value: Any) -> t.Predicate:
    if value == "after_tool_result":
        return after_tool_result
    if isinstance(value, dict) and set(value) == {"carries"}:
        return carries(str(value["carries"]))
    raise ValueError(f'"when" is "after_tool_result" or {{"carries": TEXT}}: {value!r}')
