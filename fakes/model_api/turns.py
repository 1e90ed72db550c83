"""What the fake model answers, one turn per request: pure data, no I/O.

A turn is written once and rendered for any API (`anthropic.py`, `openai.py`, `gemini.py`),
so one script can drive Claude Code, Codex and Gemini CLI alike:

- `ToolCalls(calls)`: the model calls tools (one or more in one message), optionally after a
  `text`. A call is `Shell(command)` (Claude's `Bash {command}`, Codex's
  `exec_command {cmd}`, Gemini CLI's `run_shell_command {command}`), `WriteFile(path,
  content)` (Claude's `Write`, Codex's `apply_patch` adding the file, Gemini CLI's
  `write_file {file_path, content}`), `ReadFile(path)` (Claude's `Read`, Codex's
  `exec_command cat`, Gemini CLI's `read_file {file_path}`) or `ToolCall(name, arguments)`,
  passed as written to whichever API serves it. `McpTool(server, tool, arguments)` calls a
  tool of an MCP server the CLI was given (Claude's `mcp__SERVER__TOOL`; Gemini CLI's
  `mcp_SERVER_TOOL`; Codex's `TOOL` in the namespace `mcp__SERVER`, which Codex offers only
  after a `ToolSearch(query)`: it defers every MCP tool behind its `tool_search`; Gemini CLI
  has no such tool).
- `Text(text)`: the model's final answer (`end_turn`; a Codex `message` item).
- `ApiError(status, code, message, headers)`: an error answer in the API's shape; the helpers
  `overloaded()` (Anthropic's 529), `rate_limited(retry_after)` (429) and `server_error()`.
- `UsageLimit(resets_at, window)`: the subscription's usage window is spent: Claude's 429 with
  the `anthropic-ratelimit-unified-*` headers the CLI turns into its `rate_limit_event`,
  Codex's 429 `usage_limit_reached` with `x-codex-primary-*` headers, or Gemini's 429
  `RESOURCE_EXHAUSTED` on a daily quota (whatever the window: its quotas are per day).

Every turn may also carry `delay_seconds` (the answer waits that long first), `headers`
(extra response headers, e.g. rate-limit headers on a good answer), `cut_after` (a streamed
answer, tool calls or text, stops after that many events: the connection is closed, or held
open silent when `hold_open`; Claude Code retries a closed one and waits on a held one),
`times` (the turn answers that many requests in a row), `when` (a predicate
on the request: the turn answers only a request it accepts; see `script.Script`), and its
usage: `input_tokens`, `output_tokens`, `cache_read_tokens`, `cache_write_tokens`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from fakes.model_api.recorded import RecordedRequest

# "chat": OpenAI Chat Completions (`POST /v1/chat/completions`), for clients other than the CLIs;
# "gemini": the Gemini API (`POST /v1beta/models/{model}:streamGenerateContent`), Gemini CLI.
Api = Literal["anthropic", "openai", "chat", "gemini"]
Predicate = Callable[["RecordedRequest"], bool]


# --- tool calls ---


@dataclass(frozen=True)
class ToolCall:
    """A call of the tool `name` with `arguments`, the same for both APIs. For Codex,
    `custom=True` sends it as a custom tool call whose input is `arguments["input"]`,
    `namespace` puts the function call in that namespace (an MCP server's tools), and
    `search=True` sends a `tool_search_call` whose arguments are `arguments`."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    custom: bool = False
    namespace: str = ""
    search: bool = False

    def for_api(self, api: Api) -> ToolCall:
        return self


@dataclass(frozen=True)
class Shell:
    """Run a shell command: Claude's `Bash`, Codex's `exec_command`, Gemini CLI's
    `run_shell_command`."""

    command: str

    def for_api(self, api: Api) -> ToolCall:
        if api == "anthropic":
            return ToolCall("Bash", {"command": self.command, "description": "run a command"})
        if api == "gemini":
            return ToolCall(
                "run_shell_command", {"command": self.command, "description": "run a command"}
            )
        return ToolCall("exec_command", {"cmd": self.command})


@dataclass(frozen=True)
class WriteFile:
    """Create a file with `content`: Claude's `Write`, Codex's `apply_patch` (Add File),
    Gemini CLI's `write_file`."""

    path: str
    content: str

    def for_api(self, api: Api) -> ToolCall:
        if api == "anthropic":
            return ToolCall("Write", {"file_path": self.path, "content": self.content})
        if api == "gemini":
            return ToolCall("write_file", {"file_path": self.path, "content": self.content})
        lines = self.content.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        patch = "\n".join(
            ["*** Begin Patch", f"*** Add File: {self.path}"]
            + [f"+{line}" for line in lines]
            + ["*** End Patch"]
        )
        return ToolCall("apply_patch", {"input": patch}, custom=True)


@dataclass(frozen=True)
class ReadFile:
    """Read a file: Claude's `Read`, Codex's `exec_command cat`, Gemini CLI's `read_file`."""

    path: str

    def for_api(self, api: Api) -> ToolCall:
        if api == "anthropic":
            return ToolCall("Read", {"file_path": self.path})
        if api == "gemini":
            return ToolCall("read_file", {"file_path": self.path})
        return ToolCall("exec_command", {"cmd": f"cat {json.dumps(self.path)}"})


@dataclass(frozen=True)
class McpTool:
    """Call `tool` of the MCP server named `server` in the CLI's settings."""

    server: str
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def for_api(self, api: Api) -> ToolCall:
        if api == "anthropic":
            return ToolCall(f"mcp__{self.server}__{self.tool}", self.arguments)
        if api == "gemini":  # its `mcp_SERVER_TOOL` (Gemini CLI's own name for it)
            return ToolCall(f"mcp_{self.server}_{self.tool}", self.arguments)
        return ToolCall(self.tool, self.arguments, namespace=f"mcp__{self.server}")


@dataclass(frozen=True)
class ToolSearch:
    """Codex's `tool_search` (how it offers deferred tools, MCP tools among them: their
    definitions come back in its output and the next request); Claude's `ToolSearch` tool."""

    query: str
    limit: int = 8

    def for_api(self, api: Api) -> ToolCall:
        if api == "anthropic":
            return ToolCall("ToolSearch", {"query": self.query, "max_results": self.limit})
        return ToolCall("tool_search", {"query": self.query, "limit": self.limit}, search=True)


Call = ToolCall | Shell | WriteFile | ReadFile | McpTool | ToolSearch


# --- turns ---


@dataclass(frozen=True, kw_only=True)
class Turn:
    """What every turn may carry besides its answer (see the module's docstring)."""

    delay_seconds: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    hold_open: bool = False
    times: int = 1
    when: Predicate | None = None
    input_tokens: int = 100
    output_tokens: int = 20
    # Prompt-cache tokens besides `input_tokens` (Anthropic's way of counting): read from the
    # cache, and written to it. OpenAI's answers count them inside their `input_tokens`, the
    # reads as `cached_tokens`.
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    label: str = ""

    def __post_init__(self) -> None:
        if self.times < 1:
            raise ValueError("a turn answers at least one request (times >= 1)")
        if self.delay_seconds < 0:
            raise ValueError("delay_seconds is >= 0")
        if self.cut_after is not None and self.cut_after < 0:
            raise ValueError("cut_after is >= 0")

    def accepts(self, request: RecordedRequest) -> bool:
        return self.when is None or self.when(request)


@dataclass(frozen=True, kw_only=True)
class ToolCalls(Turn):
    calls: tuple[Call, ...]
    text: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.calls:
            raise ValueError("ToolCalls needs at least one call")


@dataclass(frozen=True, kw_only=True)
class Text(Turn):
    text: str


@dataclass(frozen=True, kw_only=True)
class ApiError(Turn):
    """An error answer. `code` is the error's type (`overloaded_error`, `rate_limit_error`,
    `usage_limit_reached`, ...); `body` replaces the API's usual error body when given."""

    status: int
    code: str
    message: str = ""
    body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 400 <= self.status <= 599:
            raise ValueError("an error's status is 4xx or 5xx")


@dataclass(frozen=True, kw_only=True)
class UsageLimit(Turn):
    """The subscription's usage window is spent until `resets_at` (epoch seconds), or for
    `resets_in` seconds from when it is asked (a test that must not race its own start).
    `window` is `five_hour` or `seven_day` (Codex: its primary or secondary window)."""

    resets_at: int = 0
    window: Literal["five_hour", "seven_day"] = "five_hour"
    resets_in: float | None = None

    def reset_epoch(self, now: float) -> int:
        """When the window reopens, for an answer given at `now`."""
        return int(now + self.resets_in) if self.resets_in is not None else self.resets_at


Answer = ToolCalls | Text | ApiError | UsageLimit


def tools(*calls: Call, text: str = "", **options: Any) -> ToolCalls:
    return ToolCalls(calls=calls, text=text, **options)


def text(value: str, **options: Any) -> Text:
    return Text(text=value, **options)


def overloaded(**options: Any) -> ApiError:
    """Anthropic's 529 `overloaded_error` (for Codex: a 529 it treats as a server error)."""
    return ApiError(status=529, code="overloaded_error", message="Overloaded", **options)


def rate_limited(retry_after: float | None = None, **options: Any) -> ApiError:
    """A 429 `rate_limit_error`, with `retry-after` (seconds) when given."""
    headers = dict(options.pop("headers", {}))
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    return ApiError(
        status=429,
        code="rate_limit_error",
        message="This request would exceed your rate limit.",
        headers=headers,
        **options,
    )


def server_error(**options: Any) -> ApiError:
    return ApiError(status=500, code="api_error", message="Internal server error", **options)


def usage_limit(
    resets_at: float | None = None,
    window: str = "five_hour",
    *,
    resets_in: float | None = None,
    **options: Any,
) -> UsageLimit:
    if window not in ("five_hour", "seven_day"):
        raise ValueError("window is five_hour or seven_day")
    if (resets_at is None) == (resets_in is None):
        raise ValueError("say resets_at or resets_in")
    return UsageLimit(
        resets_at=int(resets_at or 0),
        window=window,  # type: ignore[arg-type]
        resets_in=resets_in,
        **options,
    )
