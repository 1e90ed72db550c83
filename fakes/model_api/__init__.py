"""A loopback fake of the model APIs the coding-agent CLIs speak, scripted per test.

Anthropic Messages (`POST /v1/messages`, Claude Code), OpenAI Responses
(`POST /v1/responses`, Codex) and the Gemini API (`POST /v1beta/models/MODEL:
streamGenerateContent`, Gemini CLI), streamed as the smallest Server-Sent Event streams each
CLI accepts (../shared/reference/coding-agents.md). A script is a list of turns (`turns.py`),
matched to requests in order or by a predicate (`script.py`); every request is logged
(`recorded.py`). The server (`server.py`) is a context manager; `python -m fakes.model_api`
serves a JSON script (`script_file.py`).
"""

from fakes.model_api.recorded import RecordedRequest, ToolResult
from fakes.model_api.script import Script, after_tool_result, carries, session
from fakes.model_api.server import FakeModelApi
from fakes.model_api.turns import (
    ApiError,
    McpTool,
    ReadFile,
    Shell,
    Text,
    ToolCall,
    ToolCalls,
    ToolSearch,
    UsageLimit,
    WriteFile,
    overloaded,
    rate_limited,
    server_error,
    text,
    tools,
    usage_limit,
)

__all__ = [
    "ApiError",
    "FakeModelApi",
    "McpTool",
    "ReadFile",
    "RecordedRequest",
    "Script",
    "Shell",
    "Text",
    "ToolCall",
    "ToolCalls",
    "ToolResult",
    "ToolSearch",
    "UsageLimit",
    "WriteFile",
    "after_tool_result",
    "carries",
    "overloaded",
    "rate_limited",
    "server_error",
    "session",
    "text",
    "tools",
    "usage_limit",
]
