"""Claude Code as the adapter runs it: its settings, command lines, session file, spend
and what its JSON output lines mean. Measured with the pinned version
(../shared/reference/coding-agents.md, tests/agent_clis).

Claude Code (`claude -p --output-format stream-json --verbose`):
- `system/init` names the session; `system/api_retry` is one of its own retries;
- `assistant` messages carry `tool_use` blocks (and text), `user` messages their
  `tool_result`s: a tool call is done when its result comes;
- `rate_limit_event` with status `rejected` is a usage limit, `resetsAt` its end (subscription
  mode only; with an API key a limit is a plain 429);
- one `result` at the end: `is_error` says whether it failed (a usage limit is `subtype
  success` with `is_error` true), `subtype error_max_turns` is `--max-turns` met,
  `api_error_status` the status of an API error after its retries, and
  `model_usage_since_last_result` what this process spent, per model, with its tokens.
- Its session is `~/.claude/projects/<cwd, each non-alphanumeric character a ->/<id>.jsonl`;
  `--resume ID` needs only that file.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..base import (
    API_ERROR,
    CONTEXT_FULL,
    CONTEXT_WORDS,
    ERROR,
    MAX_TURNS,
    RETRYABLE_STATUSES,
    SESSION_MISSING,
    SUCCESS,
    USAGE_LIMIT,
    AssistantText,
    Cli,
    Event,
    Finished,
    LimitHit,
    ModelMessage,
    Retrying,
    SessionStarted,
    ToolFinished,
    ToolStarted,
    as_float,
    as_int,
    call_key,
    label,
    mangled,
    next_clock_time,
)
from .spend import ClaudeSpend

if TYPE_CHECKING:
    from overnight.agent_kit.coding_agent_system import JsonLines
else:  # in the sandbox: a module of the kit, beside this package
    from coding_agent_system import JsonLines

CLAUDE_LIMIT_TEXT = re.compile(r"hit your .*limit", re.IGNORECASE)
CLAUDE_RESETS = re.compile(r"resets\s+(?:at\s+)?([0-9: ]+\s*[ap]?\.?m?\.?)\s*(\(([^)]*)\))?", re.I)
# Claude Code sends a tool-call timeout to its MCP servers; a question may wait for hours.
MCP_TIMEOUT_MS = 2_000_000_000


class ClaudeCode(Cli):
    kind = "claude-code"
    session_needles = (b'"assistant"',)
    takes_session_ids = True
    spend_class = ClaudeSpend
    spend: ClaudeSpend

    def __init__(self, cli: str, cwd: str, env: dict[str, str]) -> None:
        super().__init__(cli, cwd, env)
        self.config_dir = env.get("CLAUDE_CONFIG_DIR") or os.path.join(
            env.get("HOME") or os.path.expanduser("~"), ".claude"
        )
        self.session_home = self.config_dir  # the store keeps paths relative to it
        self.mcp_config = ""
        self._limit: LimitHit | None = None

    def settings(self, base_url: str, mcp_command: list[str], state_dir: str) -> None:
        """Claude Code's own settings: variables, and the MCP server's config file."""
        env = self.env
        if base_url:
            env["ANTHROPIC_BASE_URL"] = base_url
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
        env.setdefault("DISABLE_TELEMETRY", "1")
        env.setdefault("DISABLE_ERROR_REPORTING", "1")
        env.setdefault("DISABLE_AUTOUPDATER", "1")
        env.setdefault("MCP_TOOL_TIMEOUT", str(MCP_TIMEOUT_MS))
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # as root, --dangerously-skip-permissions refuses without
        self.mcp_config = os.path.join(state_dir, "claude-mcp.json")
        server = {
            "type": "stdio",
            "command": mcp_command[0],
            "args": mcp_command[1:],
            "timeout": MCP_TIMEOUT_MS,
        }
        from_json = json.dumps({"mcpServers": {"overnight": server}}, indent=1)
        with open(self.mcp_config, "w", encoding="utf-8") as out:
            out.write(from_json)

    def _flags(self, model: str, max_turns: int) -> list[str]:
        flags = ["--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
        flags += ["--mcp-config", self.mcp_config, "--strict-mcp-config"]
        if max_turns > 0:
            flags += ["--max-turns", str(max_turns)]
        if model:
            flags += ["--model", model]
        return flags

    def new_session(self, session_id: str, model: str, max_turns: int) -> list[str]:
        """The command of a new session with this id (the prompt comes on stdin)."""
        return [self.cli, "-p", *self._flags(model, max_turns), "--session-id", session_id]

    def resume(self, session_id: str, model: str, max_turns: int) -> list[str]:
        return [self.cli, "--resume", session_id, "-p", *self._flags(model, max_turns)]

    def new_session_id(self) -> str | None:
        return str(uuid.uuid4())

    def session_file(self, session_id: str) -> str:
        """Where the session's transcript is (or will be)."""
        projects = os.path.join(self.config_dir, "projects")
        usual = os.path.join(projects, mangled(self.cwd), f"{session_id}.jsonl")
        if os.path.exists(usual):
            return usual
        try:
            for folder in os.listdir(projects):  # a long cwd's folder name is shortened
                candidate = os.path.join(projects, folder, f"{session_id}.jsonl")
                if os.path.exists(candidate):
                    return candidate
        except OSError:
            pass
        return usual

    def store_match(self, session_id: str) -> Callable[[str], bool]:
        return lambda relative: relative.endswith(f"{session_id}.jsonl")

    def restored_path(self, relative: str) -> str:
        """Under this cwd's project folder, whatever the cwd was where it was kept (the
        CLI looks for the session only there)."""
        return os.path.join("projects", mangled(self.cwd), os.path.basename(relative))

    def started(self) -> None:
        super().started()
        self._limit = None

    def process_starting(self, session: str, mode: str, path: str) -> None:
        restored = self.cost_state(path) if path and os.path.exists(path) else 0.0
        self.spend.process_started(session, restored)

    def counted(self, event: Event, session: str) -> None:
        if isinstance(event, ModelMessage):
            self.spend.message(event.message_id, event.model, event.usage)
        elif isinstance(event, Finished):
            self.spend.result(event.cost_usd, event.total_cost_usd, event.model_usage)

    def session_lines(self, lines: Iterable[dict[str, Any]], session: str) -> None:
        """Each answer's final usage (the stream carries only its first)."""
        for line in lines:
            message = line.get("message")
            if line.get("type") != "assistant" or not isinstance(message, dict):
                continue
            usage = message.get("usage")
            if message.get("id") in self.spend.messages and isinstance(usage, dict):
                self.spend.message(str(message["id"]), str(message.get("model") or ""), usage)

    def parse(self, line: dict[str, Any]) -> list[Event]:
        kind = line.get("type")
        if kind == "system":
            subtype = line.get("subtype")
            if subtype == "init" and line.get("session_id"):
                return [SessionStarted(str(line["session_id"]))]
            if subtype == "api_retry":
                return [
                    Retrying(
                        str(line.get("error_status") or line.get("error") or "?"),
                        as_int(line.get("attempt")),
                        as_int(line.get("max_retries")),
                    )
                ]
            return []
        if kind == "assistant":
            return self._assistant(line)
        if kind == "user":
            message = line.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            return [
                ToolFinished(str(block.get("tool_use_id", "")), bool(block.get("is_error")))
                for block in (content if isinstance(content, list) else [])
                if isinstance(block, dict) and block.get("type") == "tool_result"
            ]
        if kind == "rate_limit_event":
            info = line.get("rate_limit_info")
            if isinstance(info, dict) and info.get("status") == "rejected":
                resets = info.get("resetsAt")
                self._limit = LimitHit(
                    float(resets) if isinstance(resets, (int, float)) else None,
                    str(info.get("rateLimitType") or ""),
                )
                return [self._limit]
            return []
        if kind == "result":
            return [self._result(line)]
        return []

    def _assistant(self, line: dict[str, Any]) -> list[Event]:
        message = line.get("message")
        if not isinstance(message, dict):
            return []
        events: list[Event] = []
        model = str(message.get("model") or "")
        usage = message.get("usage")
        if message.get("id") and model != "<synthetic>":
            events.append(
                ModelMessage(str(message["id"]), model, usage if isinstance(usage, dict) else {})
            )
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                name = str(block.get("name") or "?")
                value = block.get("input")
                events.append(
                    ToolStarted(
                        str(block.get("id", "")), name, call_key(name, value), label(name, value)
                    )
                )
            elif block.get("type") == "text" and model != "<synthetic>":
                events.append(AssistantText(str(block.get("text") or "")))
        return events

    def _result(self, line: dict[str, Any]) -> Finished:
        text = str(line.get("result") or "")
        usage = line.get("model_usage_since_last_result")
        model_usage = usage if isinstance(usage, dict) else {}
        cost: float | None = None
        if model_usage:
            cost = sum(
                as_float(v.get("costUSD")) for v in model_usage.values() if isinstance(v, dict)
            )
        total = line.get("total_cost_usd")
        said = line.get("api_error_status")
        status = int(said) if isinstance(said, (int, float)) else None
        finished = self._classify(line, text, status)
        finished.cost_usd = cost
        finished.total_cost_usd = float(total) if isinstance(total, (int, float)) else None
        finished.model_usage = model_usage
        return finished

    def _classify(self, line: dict[str, Any], text: str, status: int | None) -> Finished:
        subtype = str(line.get("subtype") or "")
        terminal = str(line.get("terminal_reason") or "")
        if line.get("is_error") is False and subtype == "success":
            return Finished(SUCCESS, text)
        if subtype == "error_max_turns" or terminal == "max_turns":
            return Finished(MAX_TURNS, text)
        if self._limit is not None or CLAUDE_LIMIT_TEXT.search(text):
            resets = self._limit.resets_at if self._limit is not None else None
            if resets is None:
                resets = reset_in_text(text)
            return Finished(USAGE_LIMIT, text, resets, status)
        lowered = (text + " " + terminal).lower()
        if "no conversation found" in lowered:
            return Finished(SESSION_MISSING, text)
        if any(word in lowered for word in CONTEXT_WORDS) or "prompt_too_long" in lowered:
            return Finished(CONTEXT_FULL, text)
        if status in RETRYABLE_STATUSES or terminal == "api_error":
            return Finished(API_ERROR, text, None, status)
        return Finished(ERROR, text or subtype or terminal, None, status)

    def cost_state(self, path: str) -> float:
        """The session's spend as the CLI restores it on --resume: its last `cost-state`."""
        total = 0.0
        for value in JsonLines(path, 0, (b"cost-state",)).new():
            if value.get("type") == "cost-state":
                total = as_float(value.get("totalCostUSD"))
        return total


def reset_in_text(text: str, now: float | None = None) -> float | None:
    """ "You've hit your 5-hour limit · resets 9:06am (UTC)": the next 9:06 UTC."""
    match = CLAUDE_RESETS.search(text)
    if match is None:
        return None
    zone = (match.group(3) or "").strip().upper()
    return next_clock_time(match.group(1), time.time() if now is None else now, zone == "UTC")
