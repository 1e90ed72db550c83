"""An answer's usage read from the answer itself, as it passes through the gateway: pure (bytes
in, counts out), no I/O.

- **Anthropic Messages**: a stream's `message_start` (the message's id, model, and its usage:
  input, cache writes and reads) and `message_delta` (the output so far; newer answers repeat
  the input counts there too): each count the largest seen. A whole answer's `usage`.
  `cache_creation.ephemeral_1h_input_tokens`, when given, is the part of the cache writes
  kept an hour (priced apart).
- **OpenAI Responses**: the stream's `response.completed` (or `.incomplete`, `.failed`), whose
  `response.usage` has `input_tokens` (cached ones included: `input_tokens_details.
  cached_tokens`) and `output_tokens`; a whole answer's `usage`.
- **OpenAI Chat Completions**: the chunk with a `usage` (the last, when the request asked for
  it: `stream_options.include_usage`, which `ask_for_usage` adds), or a whole answer's
  `usage` (`prompt_tokens`, `prompt_tokens_details.cached_tokens`, `completion_tokens`).
- **Gemini API** (`generateContent`, `streamGenerateContent`): the `usageMetadata` of the last
  chunk carrying one (each chunk's counts are the answer's so far), or of a whole answer (one
  object, or a stream's JSON array when no `alt=sse` was asked). `promptTokenCount` includes
  the `cachedContentTokenCount` read from the cache; `toolUsePromptTokenCount` (a built-in
  tool's prompt) is input too; `candidatesTokenCount` and `thoughtsTokenCount` are output, as
  Google bills thinking. So the counts add up to its `totalTokenCount`.

Only events whose data mentions `"usage"` (Gemini: `"usageMetadata"`) are parsed: the text and
tool deltas in between pass without being read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard

from overnight.core.model_prices import Usage

# The wire APIs (generate_content: the Gemini API's generateContent, Google's models).
Api = Literal["anthropic", "responses", "chat", "generate_content"]
# What marks an event that may hold the usage, per API.
_NEEDLES: dict[str, bytes] = {"generate_content": b'"usageMetadata"'}
# usageMetadata's counts -> the reader's names.
_GEMINI_COUNTS = (
    ("promptTokenCount", "input"),
    ("cachedContentTokenCount", "cache_read"),
    ("toolUsePromptTokenCount", "tool_input"),
    ("candidatesTokenCount", "output"),
    ("thoughtsTokenCount", "thoughts"),
)
# An event larger than this is passed on but not kept (usage events are small).
MAX_EVENT = 1024 * 1024


class SseEvents:
    """Server-Sent Events cut out of a byte stream, whatever its chunks: `feed` returns the
    data of each event ended in them whose data holds `needle`."""

    def __init__(self, needle: bytes = b'"usage"') -> None:
        self._needle = needle
        self._line = b""
        self._data: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        found: list[bytes] = []
        lines = (self._line + chunk).split(b"\n")
        self._line = lines.pop()
        if len(self._line) > MAX_EVENT:
            self._line, self._size = b"", MAX_EVENT + 1
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:
                if self._data and self._size <= MAX_EVENT:
                    data = b"\n".join(self._data)
                    if self._needle in data:
                        found.append(data)
                self._data, self._size = [], 0
            elif line.startswith(b"data:"):
                self._size += len(line)
                if self._size <= MAX_EVENT:
                    self._data.append(line[5:].removeprefix(b" "))
        return found


@dataclass
class UsageReader:
    """What one answer of `api` used, read from its stream's events or its whole body."""

    api: Api
    model: str = ""
    answer_id: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    seen: bool = False

    def event(self, data: bytes) -> None:
        """One event's data (a stream's)."""
        value = _json(data)
        if value is None:
            return
        if self.api == "anthropic":
            kind = value.get("type")
            if kind == "message_start" and isinstance(value.get("message"), dict):
                self._anthropic(value["message"])
            elif kind == "message_delta":
                self._anthropic_usage(value.get("usage"))
        elif self.api == "responses":
            kind = str(value.get("type", ""))
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                response = value.get("response")
                if isinstance(response, dict):
                    self._openai(response, "input_tokens", "output_tokens", "input_tokens_details")
        elif self.api == "generate_content":
            self._gemini(value)
        else:
            self._openai(value, "prompt_tokens", "completion_tokens", "prompt_tokens_details")

    def body(self, data: bytes) -> None:
        """A whole (not streamed) answer's body."""
        if self.api == "generate_content":
            for chunk in _json_chunks(data):
                self._gemini(chunk)
            return
        value = _json(data)
        if value is None:
            return
        if self.api == "anthropic":
            self._anthropic(value)
        elif self.api == "responses":
            self._openai(value, "input_tokens", "output_tokens", "input_tokens_details")
        else:
            self._openai(value, "prompt_tokens", "completion_tokens", "prompt_tokens_details")

    def usage(self) -> Usage | None:
        """The answer's usage; None when the answer said none."""
        if not self.seen:
            return None
        count = self.counts.get
        hour = min(count("cache_1h", 0), count("cache_write", 0))
        if self.api == "anthropic":
            return Usage(
                input_tokens=count("input", 0),
                output_tokens=count("output", 0),
                cache_read_tokens=count("cache_read", 0),
                cache_write_tokens=count("cache_write", 0) - hour,
                cache_write_1h_tokens=hour,
            )
        cached = min(count("cache_read", 0), count("input", 0))
        if self.api == "generate_content":
            return Usage(
                input_tokens=count("input", 0) - cached + count("tool_input", 0),
                output_tokens=count("output", 0) + count("thoughts", 0),
                cache_read_tokens=cached,
            )
        return Usage(
            input_tokens=count("input", 0) - cached,
            output_tokens=count("output", 0),
            cache_read_tokens=cached,
        )

    def _anthropic(self, message: dict[str, Any]) -> None:
        self.model = self.model or str(message.get("model") or "")
        self.answer_id = self.answer_id or str(message.get("id") or "")
        self._anthropic_usage(message.get("usage"))

    def _anthropic_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        self._count("input", usage.get("input_tokens"))
        self._count("output", usage.get("output_tokens"))
        self._count("cache_write", usage.get("cache_creation_input_tokens"))
        self._count("cache_read", usage.get("cache_read_input_tokens"))
        creation = usage.get("cache_creation")
        if isinstance(creation, dict):
            self._count("cache_1h", creation.get("ephemeral_1h_input_tokens"))

    def _openai(self, value: dict[str, Any], inputs: str, outputs: str, details: str) -> None:
        self.model = self.model or str(value.get("model") or "")
        self.answer_id = self.answer_id or str(value.get("id") or "")
        usage = value.get("usage")
        if not isinstance(usage, dict):
            return
        self._count("input", usage.get(inputs))
        self._count("output", usage.get(outputs))
        cached = usage.get(details)
        if isinstance(cached, dict):
            self._count("cache_read", cached.get("cached_tokens"))

    def _gemini(self, value: dict[str, Any]) -> None:
        self.model = self.model or str(value.get("modelVersion") or "")
        self.answer_id = self.answer_id or str(value.get("responseId") or "")
        usage = value.get("usageMetadata")
        if not isinstance(usage, dict):
            return
        # Each chunk's usageMetadata is the answer's so far: the last one stands, whole.
        counts = {name: usage.get(key) for key, name in _GEMINI_COUNTS}
        kept = {name: n for name, n in counts.items() if _is_count(n)}
        if kept:
            self.seen = True
            self.counts = kept

    def _count(self, name: str, value: object) -> None:
        if not _is_count(value):
            return
        self.seen = True
        self.counts[name] = max(self.counts.get(name, 0), value)


def ask_for_usage(body: dict[str, Any]) -> bool:
    """Make a streamed Chat Completions request ask for its usage (the last chunk); True when
    the body was changed. The usage chunk then reaches the client too (its `choices` empty,
    as OpenAI documents it)."""
    if body.get("stream") is not True:
        return False
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return False
    body["stream_options"] = {
        **(options if isinstance(options, dict) else {}),
        "include_usage": True,
    }
    return True


def usage_needle(api: Api) -> bytes:
    """What an event's data holds when it may carry `api`'s usage (SseEvents' needle)."""
    return _NEEDLES.get(api, b'"usage"')


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_chunks(data: bytes) -> list[dict[str, Any]]:
    """A whole Gemini answer: one object, or a stream's array of them (no `alt=sse`)."""
    try:
        value = json.loads(data)
    except ValueError:
        return []
    chunks = value if isinstance(value, list) else [value]
    return [chunk for chunk in chunks if isinstance(chunk, dict)]


def _json(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
