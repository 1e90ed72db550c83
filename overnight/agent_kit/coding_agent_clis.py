"""The two coding-agent CLIs the adapter (`coding_agent.py`) supervises: how each is set up,
started and resumed, and what its JSON output lines mean, as events of one vocabulary.

Standard library only, Python 3.8 or newer, like the kit. What is relied on was measured with
the pinned versions (../shared/reference/coding-agents.md, tests/agent_clis):

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

import datetime as _dt
import hashlib
import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit.coding_agent_system import JsonLines, write_whole
else:  # in the sandbox: a sibling module
    from coding_agent_system import JsonLines, write_whole

# --- events --------------------------------------------------------------------------------


class Event:
    """Something a CLI's output line says."""


class SessionStarted(Event):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id


class ToolStarted(Event):
    """A tool call: `key` is the same for the same call with the same input (loops), `label`
    a short human name ("Bash `pytest -q`")."""

    def __init__(self, call_id: str, name: str, key: str, label: str) -> None:
        self.call_id = call_id
        self.name = name
        self.key = key
        self.label = label


class ToolFinished(Event):
    def __init__(self, call_id: str, is_error: bool) -> None:
        self.call_id = call_id
        self.is_error = is_error


class AssistantText(Event):
    def __init__(self, text: str) -> None:
        self.text = text


class ModelMessage(Event):
    """A model answer this process received (Claude: its id, for the spend of a killed one)."""

    def __init__(self, message_id: str, model: str, usage: dict[str, Any]) -> None:
        self.message_id = message_id
        self.model = model
        self.usage = usage


class LimitHit(Event):
    """A usage limit reported as it happened (before the result says the run failed)."""

    def __init__(self, resets_at: float | None, window: str) -> None:
        self.resets_at = resets_at
        self.window = window


class Retrying(Event):
    """The CLI retries a model call itself."""

    def __init__(self, status: str, attempt: int, most: int) -> None:
        self.status = status
        self.attempt = attempt
        self.most = most


class TokenTotals(Event):
    """Codex: the thread's token counts so far."""

    def __init__(self, totals: dict[str, int]) -> None:
        self.totals = totals


# The outcomes a CLI process ends with (`Finished.outcome`).
SUCCESS = "success"
MAX_TURNS = "max_turns"
CONTEXT_FULL = "context_full"
USAGE_LIMIT = "usage_limit"
API_ERROR = "api_error"
SESSION_MISSING = "session_missing"
ERROR = "error"


class Finished(Event):
    """The CLI's last word on this process: `outcome` (above), its text, and what it knows of
    a limit's end (`resets_at`) or an API error's status."""

    def __init__(
        self,
        outcome: str,
        text: str,
        resets_at: float | None = None,
        status: int | None = None,
        cost_usd: float | None = None,
        total_cost_usd: float | None = None,
        model_usage: dict[str, Any] | None = None,
    ) -> None:
        self.outcome = outcome
        self.text = text
        self.resets_at = resets_at
        self.status = status
        self.cost_usd = cost_usd
        self.total_cost_usd = total_cost_usd
        self.model_usage = model_usage or {}


# --- shared helpers ------------------------------------------------------------------------

RETRYABLE_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504, 529}
CONTEXT_WORDS = (
    "prompt is too long",
    "context window",
    "context_length_exceeded",
    "context length",
    "maximum context",
    "too many tokens",
)


def call_key(name: str, value: Any) -> str:
    """A digest naming a tool call with its input (the same call, the same key)."""
    text = json.dumps([name, value], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:24]


def clip(text: str, most: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def mangled(path: str) -> str:
    """Claude Code's folder name for a working directory: each non-alphanumeric character a -."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


_CLOCK = re.compile(r"(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?", re.IGNORECASE)


def next_clock_time(text: str, now: float, utc: bool) -> float | None:
    """The next moment after `now` at the clock time `text` names ("9:06am", "21:30", "9 PM"),
    in UTC (`utc`) or the local zone; None when it names none."""
    match = _CLOCK.search(text)
    if match is None or (match.group(2) is None and match.group(3) is None):
        return None
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    meridiem = (match.group(3) or "").lower().replace(".", "")
    if meridiem == "pm" and hour < 12:
        hour += 12
    if meridiem == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return None
    zone = _dt.timezone.utc if utc else None  # noqa: UP017 (Python 3.8)
    base = _dt.datetime.fromtimestamp(now, zone)
    moment = base.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment.timestamp() <= now:
        moment += _dt.timedelta(days=1)
    return moment.timestamp()


# --- Claude Code ---------------------------------------------------------------------------

CLAUDE_LIMIT_TEXT = re.compile(r"hit your .*limit", re.IGNORECASE)
CLAUDE_RESETS = re.compile(r"resets\s+(?:at\s+)?([0-9: ]+\s*[ap]?\.?m?\.?)\s*(\(([^)]*)\))?", re.I)
# Claude Code sends a tool-call timeout to its MCP servers; a question may wait for hours.
MCP_TIMEOUT_MS = 2_000_000_000


class Cli:
    """What the adapter asks of either CLI (ClaudeCode, Codex)."""

    kind = ""

    def __init__(self, cli: str, cwd: str, env: dict[str, str]) -> None:
        self.cli = cli
        self.cwd = cwd
        self.env = env
        self.session_home = ""  # the folder its session files are under

    def settings(self, base_url: str, mcp_command: list[str], state_dir: str) -> None:
        raise NotImplementedError

    def new_session(self, session_id: str, model: str, max_turns: int) -> list[str]:
        raise NotImplementedError

    def resume(self, session_id: str, model: str, max_turns: int) -> list[str]:
        raise NotImplementedError

    def new_session_id(self) -> str | None:
        raise NotImplementedError

    def session_file(self, session_id: str) -> str:
        raise NotImplementedError

    def store_match(self, session_id: str) -> Callable[[str], bool]:
        raise NotImplementedError

    def restored_path(self, relative: str) -> str:
        """Where a session file kept at `relative` (in the store) goes in this sandbox."""
        return relative

    def started(self) -> None:
        raise NotImplementedError

    def parse(self, line: dict[str, Any]) -> list[Event]:
        raise NotImplementedError


class ClaudeCode(Cli):
    kind = "claude-code"

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
        """Claude Code takes the id of a new session (Codex names its own: None)."""
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
        """A new process: forget what the last one said."""
        self._limit = None

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
                        _int(line.get("attempt")),
                        _int(line.get("max_retries")),
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
                        str(block.get("id", "")), name, call_key(name, value), _label(name, value)
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
                _float(v.get("costUSD")) for v in model_usage.values() if isinstance(v, dict)
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
                resets = _claude_reset_in_text(text)
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
                total = _float(value.get("totalCostUSD"))
        return total


def _claude_reset_in_text(text: str, now: float | None = None) -> float | None:
    """ "You've hit your 5-hour limit · resets 9:06am (UTC)": the next 9:06 UTC."""
    match = CLAUDE_RESETS.search(text)
    if match is None:
        return None
    zone = (match.group(3) or "").strip().upper()
    return next_clock_time(match.group(1), time.time() if now is None else now, zone == "UTC")


def _label(name: str, value: Any) -> str:
    """A tool call as a person reads it: Bash `pytest -q`, Write notes.txt, Read app.py."""
    if not isinstance(value, dict):
        return name
    for key in ("command", "cmd"):
        if isinstance(value.get(key), str):
            return f"{name} `{clip(value[key], 60)}`"
    for key in ("file_path", "path", "notebook_path", "pattern", "url", "query", "question"):
        if isinstance(value.get(key), str):
            return f"{name} {clip(value[key], 60)}"
    return name


# --- Codex ---------------------------------------------------------------------------------

CODEX_LIMIT_TEXT = re.compile(r"usage limit|usage_limit", re.IGNORECASE)
CODEX_TRY_AGAIN = re.compile(r"try again at ([0-9: ]+\s*[AaPp]\.?[Mm]\.?|[0-9]{1,2}:[0-9]{2})")
CODEX_STATUS = re.compile(r"last status: (\d{3})|\b(\d{3}) [A-Z][a-z]+")
CODEX_TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")
VENDOR_OPENAI_URL = "https://api.openai.com/v1"
# Codex's tool-call timeout for an MCP server, in seconds: a question may wait for hours.
MCP_TIMEOUT_SECONDS = 2_000_000


class Codex(Cli):
    kind = "codex"

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

    def new_session_id(self) -> str | None:
        return None

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
        self._last_text = ""
        self._failure = ""

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
            if _float(window.get("used_percent")) >= 100:
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
    return _label(name, value)


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
        "input_tokens": _int(usage.get("input_tokens")),
        "cached_input_tokens": _int(usage.get("cached_input_tokens")),
        "output_tokens": _int(usage.get("output_tokens")),
    }


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


CLIS: dict[str, type[Cli]] = {"claude-code": ClaudeCode, "codex": Codex}
