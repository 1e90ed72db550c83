"""Codex as the adapter runs it: its settings, command lines, session file, spend and what
its JSON output lines mean. Measured with the pinned version
(../shared/reference/coding-agents.md, tests/agent_clis).

Codex (`codex exec --json`):
- `thread.started` names the thread; `item.started` / `item.completed` a tool call
  (`command_execution`, `file_change`, `mcp_tool_call`, ...) and `agent_message` text;
- `turn.completed` is the end of a good turn (usage: tokens only, cumulative over the thread),
  `turn.failed` of a failed one (its message: "usage limit", "exceeded retry limit, last status:
  429", ...); `error` lines are its own retries ("Reconnecting... 1/5");
- Its session is `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl` (the token
  counts and rate-limit windows as they happen: `resets_at` of a usage limit is there);
  `exec resume THREAD` needs only that file. Its MCP tools are deferred behind `tool_search`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..base import (
    API_ERROR,
    CONTEXT_FULL,
    CONTEXT_WORDS,
    ERROR,
    RETRYABLE_STATUSES,
    SESSION_MISSING,
    SUCCESS,
    USAGE_LIMIT,
    AssistantText,
    Cli,
    Event,
    Finished,
    Retrying,
    SessionStarted,
    TokenTotals,
    ToolFinished,
    ToolStarted,
    as_float,
    as_int,
    call_key,
    clip,
    label,
    next_clock_time,
)
from .spend import CodexSpend

if TYPE_CHECKING:
    from overnight.agent_kit.coding_agent_system import JsonLines, write_whole
else:  # in the sandbox: a module of the kit, beside this package
    from coding_agent_system import JsonLines, write_whole

CODEX_LIMIT_TEXT = re.compile(r"usage limit|usage_limit", re.IGNORECASE)
CODEX_TRY_AGAIN = re.compile(r"try again at ([0-9: ]+\s*[AaPp]\.?[Mm]\.?|[0-9]{1,2}:[0-9]{2})")
CODEX_STATUS = re.compile(r"last status: (\d{3})|\b(\d{3}) [A-Z][a-z]+")
CODEX_TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")
VENDOR_OPENAI_URL = "https://api.openai.com/v1"
# Codex's tool-call timeout for an MCP server, in seconds: a question may wait for hours.
MCP_TIMEOUT_SECONDS = 2_000_000


class Codex(Cli):
    kind = "codex"
    session_needles = (b"token_count", b"turn_context")
    counts_turns = True  # `codex exec` has no turn limit of its own
    spend_class = CodexSpend
    spend: CodexSpend

    def __init__(self, cli: str, cwd: str, env: dict[str, str]) -> None:
        super().__init__(cli, cwd, env)
        self.codex_home = env.get("CODEX_HOME") or os.path.join(
            env.get("HOME") or os.path.expanduser("~"), ".codex"
        )
        env["CODEX_HOME"] = self.codex_home
        self.session_home = self.codex_home
        self._last_text = ""
        self._failure = ""

    def settings(self, base_url: str, mcp_command: list[str], state_dir: str) -> None:
        """Codex's own settings: `$CODEX_HOME/config.toml` (written whole), and the variables
        its npm launcher would set."""
        env = self.env
        package = _codex_package_root(self.cli)
        env.setdefault("CODEX_MANAGED_BY_NPM", "1")
        if package:
            env.setdefault("CODEX_MANAGED_PACKAGE_ROOT", package)
        if not base_url and env.get("OPENAI_API_KEY"):
            base_url = VENDOR_OPENAI_URL  # the key from the environment, not a login
        lines = []
        if base_url:
            lines += ['model_provider = "overnight"']
        lines += [
            "[analytics]",
            "enabled = false",
            "[features]",
            "plugins = false",
        ]
        if base_url:
            lines += [
                "[model_providers.overnight]",
                'name = "overnight"',
                f"base_url = {_toml(_responses_base(base_url))}",
                'wire_api = "responses"',
                'env_key = "OPENAI_API_KEY"',
            ]
        lines += [
            "[mcp_servers.overnight]",
            f"command = {_toml(mcp_command[0])}",
            f"args = [{', '.join(_toml(arg) for arg in mcp_command[1:])}]",
            f"tool_timeout_sec = {MCP_TIMEOUT_SECONDS}",
            "startup_timeout_sec = 30",
            "",
        ]
        os.makedirs(self.codex_home, exist_ok=True)
        write_whole(os.path.join(self.codex_home, "config.toml"), "\n".join(lines))

    def _flags(self, model: str) -> list[str]:
        flags = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if model:
            flags += ["-m", model]
        return flags

    def new_session(self, session_id: str, model: str, max_turns: int) -> list[str]:
        return [self.cli, "exec", *self._flags(model), "-"]

    def resume(self, session_id: str, model: str, max_turns: int) -> list[str]:
        return [self.cli, "exec", "resume", *self._flags(model), session_id, "-"]

    def session_file(self, session_id: str) -> str:
        sessions = os.path.join(self.codex_home, "sessions")
        found = ""
        for folder, _, names in os.walk(sessions):
            for name in names:
                if name.startswith("rollout-") and name.endswith(f"-{session_id}.jsonl"):
                    found = max(found, os.path.join(folder, name))
        return found

    def store_match(self, session_id: str) -> Callable[[str], bool]:
        return lambda relative: (
            relative.startswith("sessions") and relative.endswith(f"-{session_id}.jsonl")
        )

    def started(self) -> None:
        super().started()
        self._last_text = ""
        self._failure = ""

    def process_starting(self, session: str, mode: str, path: str) -> None:
        """A resumed thread's totals so far were spent before this adapter: its base."""
        if session and mode == "resume" and session not in self.spend.threads:
            lines = JsonLines(path, 0, self.session_needles).new() if path else iter(())
            facts = self.rollout_facts(lines)
            self.spend.thread_totals(session, facts.get("totals") or {}, new=False)

    def session_started(self, session: str) -> None:
        self.spend.thread_totals(session, {}, new=True)

    def counted(self, event: Event, session: str) -> None:
        if isinstance(event, TokenTotals) and session:
            self.spend.thread_totals(session, event.totals, new=False)

    def session_lines(self, lines: Iterable[dict[str, Any]], session: str) -> None:
        """The rollout's token counts and usage-limit windows (exact, where the output's text
        is a clock time)."""
        facts = self.rollout_facts(lines)
        if "totals" in facts and session:
            self.spend.thread_totals(session, facts["totals"], new=False)
        if "resets_at" in facts:
            self.resets_at = facts["resets_at"]
        if facts.get("model") and not self.spend.model:
            self.spend.model = str(facts["model"])

    def parse(self, line: dict[str, Any]) -> list[Event]:
        kind = line.get("type")
        if kind == "thread.started" and line.get("thread_id"):
            return [SessionStarted(str(line["thread_id"]))]
        if kind in ("item.started", "item.completed"):
            return self._item(str(kind), line.get("item"))
        if kind == "turn.completed":
            usage = line.get("usage")
            events: list[Event] = []
            if isinstance(usage, dict):
                events.append(TokenTotals(_token_totals(usage)))
            events.append(Finished(SUCCESS, self._last_text))
            return events
        if kind == "turn.failed":
            error = line.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            return [self._failed(str(message or self._failure or "turn failed"))]
        if kind == "error":
            message = str(line.get("message") or "")
            match = re.search(r"Reconnecting\.\.\.\s*(\d+)/(\d+)", message)
            if match:
                status = CODEX_STATUS.search(message)
                said = (status.group(1) or status.group(2)) if status else "?"
                return [Retrying(said, int(match.group(1)), int(match.group(2)))]
            self._failure = message
            return []
        return []

    def _item(self, kind: str, item: Any) -> list[Event]:
        if not isinstance(item, dict):
            return []
        item_type = item.get("type")
        call_id = str(item.get("id") or "")
        if item_type == "agent_message":
            if kind == "item.completed":
                self._last_text = str(item.get("text") or "")
                return [AssistantText(self._last_text)]
            return []
        if item_type not in CODEX_TOOL_ITEMS:
            return []
        events: list[Event] = []
        name, value = _codex_call(item)
        started = ToolStarted(call_id, name, call_key(name, value), _codex_label(name, value))
        if kind == "item.started":
            return [started]
        events.append(started)  # the adapter ignores a second start of the same call
        status = str(item.get("status") or "")
        exit_code = item.get("exit_code")
        failed = status in ("failed", "declined") or (isinstance(exit_code, int) and exit_code != 0)
        events.append(ToolFinished(call_id, failed))
        return events

    def _failed(self, message: str) -> Finished:
        lowered = message.lower()
        if CODEX_LIMIT_TEXT.search(message):
            return Finished(USAGE_LIMIT, message, _codex_reset_in_text(message))
        if "no rollout found" in lowered or "thread not found" in lowered:
            return Finished(SESSION_MISSING, message)
        if any(word in lowered for word in CONTEXT_WORDS):
            return Finished(CONTEXT_FULL, message)
        status = CODEX_STATUS.search(message)
        number = int(status.group(1) or status.group(2)) if status else None
        if number in RETRYABLE_STATUSES or any(
            word in lowered
            for word in ("overloaded", "stream disconnected", "timed out", "connection")
        ):
            return Finished(API_ERROR, message, None, number)
        return Finished(ERROR, message, None, number)

    @staticmethod
    def rollout_facts(lines: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """What rollout lines say of spend and limits: `totals` (the thread's token counts),
        `resets_at` (a rejected window's end), `model`."""
        facts: dict[str, Any] = {}
        for line in lines:
            payload = line.get("payload")
            if not isinstance(payload, dict):
                continue
            if line.get("type") == "turn_context" and payload.get("model"):
                facts["model"] = str(payload["model"])
            if payload.get("type") != "token_count":
                continue
            info = payload.get("info")
            if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
                facts["totals"] = _token_totals(info["total_token_usage"])
            limits = payload.get("rate_limits")
            if isinstance(limits, dict):
                resets = _rejected_reset(limits)
                if resets is not None:
                    facts["resets_at"] = resets
        return facts


def _rejected_reset(limits: dict[str, Any]) -> float | None:
    """The latest end among the windows used up (100 %); None when none is."""
    spent = []
    for name in ("primary", "secondary"):
        window = limits.get(name)
        if not isinstance(window, dict):
            continue
        resets = window.get("resets_at")
        if isinstance(resets, (int, float)) and resets > 0:
            if as_float(window.get("used_percent")) >= 100:
                spent.append(float(resets))
    return max(spent) if spent else None


def _codex_reset_in_text(message: str) -> float | None:
    """ "... try again at 9:10 AM": Codex prints the local clock time."""
    match = CODEX_TRY_AGAIN.search(message)
    return next_clock_time(match.group(1), time.time(), False) if match else None


def _codex_call(item: dict[str, Any]) -> tuple[str, Any]:
    kind = str(item.get("type"))
    if kind == "command_execution":
        return "shell", str(item.get("command") or "")
    if kind == "file_change":
        return "apply_patch", item.get("changes")
    if kind == "mcp_tool_call":
        return f"{item.get('server')}.{item.get('tool')}", item.get("arguments")
    return kind, item.get("query") or item.get("action")


def _codex_label(name: str, value: Any) -> str:
    if name == "shell":
        command = str(value)
        try:
            words = shlex.split(command)
        except ValueError:
            words = []
        if len(words) == 3 and words[0].endswith("sh") and words[1] in ("-lc", "-c"):
            command = words[2]
        return f"shell `{clip(command, 60)}`"
    if name == "apply_patch" and isinstance(value, list):
        paths = [str(c.get("path")) for c in value if isinstance(c, dict) and c.get("path")]
        return f"apply_patch {clip(', '.join(os.path.basename(p) for p in paths), 60)}"
    return label(name, value)


def _codex_package_root(cli: str) -> str:
    """`<prefix>/node_modules/@openai/codex` for a native binary under
    `<prefix>/node_modules/@openai/codex-linux-<cpu>/vendor/...`, else ""."""
    marker = os.sep + "node_modules" + os.sep + "@openai" + os.sep
    at = cli.find(marker)
    if at < 0:
        return ""
    return cli[: at + len(marker)] + "codex"


def _responses_base(url: str) -> str:
    """Codex's provider `base_url` ends at `/v1` (it adds `/responses`)."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def _toml(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


def _token_totals(usage: dict[str, Any]) -> dict[str, int]:
    return {
        "input_tokens": as_int(usage.get("input_tokens")),
        "cached_input_tokens": as_int(usage.get("cached_input_tokens")),
        "output_tokens": as_int(usage.get("output_tokens")),
    }
