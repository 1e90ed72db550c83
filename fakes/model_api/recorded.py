"""One request the fake received, as tests read it: pure data and accessors, no I/O.

Every API is read the same way:
- `session_id`: Claude Code's `X-Claude-Code-Session-Id` header; Codex's `session-id` header
  (its thread id; also `thread-id` and the body's `prompt_cache_key`); for Gemini, whose CLI
  sends no session of its own, the `x-overnight-session-id` header (Gemini CLI sends the
  headers of its `GEMINI_CLI_CUSTOM_HEADERS`, `name:value` pairs split at commas);
- `model`: the body's `model`; for Gemini, the one in the path (`/v1beta/models/MODEL:...`);
- `tool_results()`: the results the client sends back (Claude: `tool_result` blocks in user
  messages; Codex: `function_call_output` / `custom_tool_call_output` items; Gemini:
  `functionResponse` parts of `contents`, whose `response` holds `output` or `error`), in order;
- `last_tool_results()`: those after the model's last message, i.e. the answers to the calls
  of the previous turn;
- `text()`: every text the request carries (prompts, tool results), for "the next request
  carries the answer".
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fakes.model_api.turns import Api

GEMINI_SESSION_HEADER = "x-overnight-session-id"


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    output: str
    is_error: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    number: int  # 1, 2, ... in the order received
    api: Api
    method: str
    path: str
    query: str
    headers: Mapping[str, str]  # names lower-cased
    body: Any  # the parsed JSON body (None when it was not JSON)
    received_at: float  # time.monotonic() when its body was read
    received_at_epoch: float  # time.time(), the same moment
    # Filled in by the server once answered:
    turn_index: int | None = None  # which turn of the script answered (None: none matched)
    label: str = ""  # that turn's label
    status: int = 0
    call_ids: tuple[str, ...] = field(default_factory=tuple)

    # --- identity ---

    @property
    def session_id(self) -> str:
        if self.api == "anthropic":
            return self.headers.get("x-claude-code-session-id", "")
        if self.api == "gemini":
            return self.headers.get(GEMINI_SESSION_HEADER, "")
        return self.headers.get("session-id") or self.headers.get("thread-id", "")

    @property
    def model(self) -> str:
        if self.api == "gemini":
            return gemini_model(self.path)
        return str(self._body_dict().get("model", ""))

    @property
    def tool_names(self) -> list[str]:
        tools = [tool for tool in self._body_dict().get("tools") or [] if isinstance(tool, dict)]
        if self.api == "gemini":  # [{"functionDeclarations": [{"name", ...}]}]
            tools = [
                declaration
                for tool in tools
                for declaration in tool.get("functionDeclarations") or []
                if isinstance(declaration, dict)
            ]
        return [str(tool["name"]) for tool in tools if tool.get("name")]

    # --- content ---

    def items(self) -> list[dict[str, Any]]:
        """The conversation as sent: Claude's `messages`, Codex's `input` items, Chat
        Completions' `messages`, Gemini's `contents`."""
        body = self._body_dict()
        key = {"openai": "input", "gemini": "contents"}.get(self.api, "messages")
        value = body.get(key)
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
        return [item for item in value or [] if isinstance(item, dict)]

    def tool_results(self) -> list[ToolResult]:
        return list(_tool_results(self.api, self.items()))

    def last_tool_results(self) -> list[ToolResult]:
        """The tool results after the model's last turn (empty when the last thing sent is
        not a tool result)."""
        items = self.items()
        if self.api == "gemini":
            last_content = items[-1] if items else None
            if last_content is None or last_content.get("role") != "user":
                return []
            return list(_tool_results(self.api, [last_content]))
        if self.api == "chat":
            answers: list[dict[str, Any]] = []
            for item in reversed(items):
                if item.get("role") != "tool":
                    break
                answers.insert(0, item)
            return list(_tool_results(self.api, answers))
        if self.api == "anthropic":
            last = items[-1] if items else None
            if last is None or last.get("role") != "user":
                return []
            return list(_tool_results(self.api, [last]))
        tail: list[dict[str, Any]] = []
        for item in reversed(items):
            if item.get("type") not in ("function_call_output", "custom_tool_call_output"):
                break
            tail.insert(0, item)
        return list(_tool_results(self.api, tail))

    def result_for(self, call_id: str) -> ToolResult | None:
        for result in self.tool_results():
            if result.call_id == call_id:
                return result
        return None

    def text(self) -> str:
        """Every text in the conversation, joined by newlines."""
        if self.api == "gemini":
            return "\n".join(_gemini_texts(self.items()))
        return "\n".join(_texts(self.items()))

    def _body_dict(self) -> dict[str, Any]:
        return self.body if isinstance(self.body, dict) else {}

    def summary(self) -> dict[str, Any]:
        """What a log line says about this request (no bodies)."""
        return {
            "number": self.number,
            "api": self.api,
            "path": self.path,
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "label": self.label,
            "status": self.status,
            "call_ids": list(self.call_ids),
            "last_tool_results": [
                {"call_id": r.call_id, "output": r.output[:200], "is_error": r.is_error}
                for r in self.last_tool_results()
            ],
        }


def gemini_model(path: str) -> str:
    """The model of a Gemini API path: `/v1beta/models/MODEL:METHOD` (or `.../MODEL`)."""
    _, found, rest = path.partition("/models/")
    return rest.split(":", 1)[0] if found else ""


def _gemini_parts(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for content in items:
        for part in content.get("parts") or []:
            if isinstance(part, dict):
                yield part


def _gemini_responses(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for part in _gemini_parts(items):
        if isinstance(part.get("functionResponse"), dict):
            yield part["functionResponse"]


def _gemini_result(response: dict[str, Any]) -> ToolResult:
    value = response.get("response")
    value = value if isinstance(value, dict) else {"output": value}
    is_error = "error" in value and "output" not in value
    output = value.get("error" if is_error else "output", value)
    text = output if isinstance(output, str) else json.dumps(output)
    return ToolResult(str(response.get("id", "")), text, is_error)


def _gemini_texts(items: list[dict[str, Any]]) -> Iterator[str]:
    """Texts of `contents`: `text` parts and the tool results."""
    for part in _gemini_parts(items):
        if isinstance(part.get("text"), str):
            yield part["text"]
        elif isinstance(part.get("functionResponse"), dict):
            yield _gemini_result(part["functionResponse"]).output


def _tool_results(api: Api, items: list[dict[str, Any]]) -> Iterator[ToolResult]:
    if api == "gemini":
        for response in _gemini_responses(items):
            yield _gemini_result(response)
        return
    if api == "anthropic":
        for message in items:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield ToolResult(
                        str(block.get("tool_use_id", "")),
                        "\n".join(_texts([{"content": block.get("content")}])),
                        bool(block.get("is_error", False)),
                    )
        return
    if api == "chat":
        for message in items:
            if message.get("role") == "tool":
                content = message.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
                yield ToolResult(str(message.get("tool_call_id", "")), text)
        return
    for item in items:
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            if not isinstance(output, str):
                output = json.dumps(output)
            yield ToolResult(str(item.get("call_id", "")), output)


def _texts(items: list[Any]) -> Iterator[str]:
    """Texts anywhere in messages or items: strings under `text`, `content` or `output`."""
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, list):
            yield from _texts(item)
        elif isinstance(item, dict):
            for key in ("text", "content", "output"):
                value = item.get(key)
                if isinstance(value, str):
                    yield value
                elif isinstance(value, list | dict):
                    yield from _texts([value] if isinstance(value, dict) else value)
