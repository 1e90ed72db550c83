"""Gemini CLI as the adapter runs it: its settings, command lines, session file, spend and
what its JSON output lines mean. Measured with the pinned version (tests/kinds/gemini.py).

Gemini CLI (`gemini -o stream-json --approval-mode yolo`, the prompt on stdin):
- `init` names the session (`--session-id` gives a new one its id); `message` lines of role
  `assistant` are its text, in deltas; `tool_use` / `tool_result` a tool call and its end;
- one `result` at the end: `status` `success`, or `error` with `error.type` and `.message`
  (an API error after its own retries, a turn limit, a fatal tool error); `stats` are this
  process's tokens;
- a session it cannot resume is said on stderr only ("Error resuming session"), exit 42, as
  is when a spent quota resets (the API's "Please retry in Ns", in the error it prints);
- its session is `$GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/session-<time>-<id[:8]>.jsonl`,
  each model answer a line with its `tokens`; `--resume ID` needs only that file, in the same
  working directory.
- Its settings are the user's (`$GEMINI_CLI_HOME/.gemini/settings.json`): with a base URL it
  must be told its auth type, or headless mode refuses to start. A system settings file would
  pin them against the workspace's `.gemini/settings.json`, but it reads one only in a folder
  root owns, and the agent does not run as root; what the workspace's file could change is the
  agent's own CLI, while the key, the spend and the network are held outside the sandbox.
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
    SessionStarted,
    ToolFinished,
    ToolStarted,
    call_key,
    label,
)
from .spend import GeminiSpend

if TYPE_CHECKING:
    from overnight.agent_kit.coding_agent_system import JsonLines, write_whole
else:  # in the sandbox: a module of the kit, beside this package
    from coding_agent_system import JsonLines, write_whole

# Its MCP tool-call timeout, in milliseconds: a question may wait for hours.
MCP_TIMEOUT_MS = 2_000_000_000
# Its statuses as the Gemini API names them, and the numbers they stand for.
API_STATUSES = {
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
    "INTERNAL": 500,
    "DEADLINE_EXCEEDED": 504,
}
STATUS_NUMBER = re.compile(r"\b(?:status|code)[\":\s]+(\d{3})\b", re.IGNORECASE)
TURN_LIMIT_ERRORS = ("FatalTurnLimitedError",)
# The API's own words in the error it printed: "Please retry in 17998s."
RETRY_IN = re.compile(r"retry in (\d+(?:\.\d+)?)s\b", re.IGNORECASE)
QUOTA_TEXT = re.compile(r"exhausted your (?:daily )?quota|quota exceeded", re.IGNORECASE)
# Its own default model when it is not routing each turn.
DEFAULT_MODEL = "gemini-2.5-pro"
# The header that names the session to the model API (the fakes count sessions by it).
SESSION_HEADER = "x-overnight-session-id"


class Gemini(Cli):
    kind = "gemini"
    session_needles = (b'"tokens"',)
    takes_session_ids = True
    counts_turns = True  # its own turn limit ends the session with an error: the adapter counts
    spend_class = GeminiSpend
    spend: GeminiSpend

    def __init__(self, cli: str, cwd: str, env: dict[str, str]) -> None:
        super().__init__(cli, cwd, env)
        self.gemini_home = env.get("GEMINI_CLI_HOME") or (
            env.get("HOME") or os.path.expanduser("~")
        )
        env["GEMINI_CLI_HOME"] = self.gemini_home
        self.session_home = os.path.join(self.gemini_home, ".gemini")
        self._text: list[str] = []
        self._said = ""

    def settings(self, base_url: str, mcp_command: list[str], state_dir: str) -> None:
        """Its variables, and its user settings file (written whole at each start)."""
        env = self.env
        if base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = base_url
        env["GEMINI_CLI_NO_RELAUNCH"] = "true"  # else a kill of it orphans its child
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "telemetry": {"enabled": False},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            # Its own loop check ends the process as if the task were done; the adapter's
            # (the same call again and again) restarts it from the checkpoint, named.
            "model": {"disableLoopDetection": True},
            "mcpServers": {
                "overnight": {
                    "command": mcp_command[0],
                    "args": mcp_command[1:],
                    "timeout": MCP_TIMEOUT_MS,
                    "trust": True,
                }
            },
        }
        os.makedirs(self.session_home, exist_ok=True)
        write_whole(
            os.path.join(self.session_home, "settings.json"), json.dumps(settings, indent=1)
        )

    def _flags(self, session_id: str, model: str) -> list[str]:
        self.env["GEMINI_CLI_CUSTOM_HEADERS"] = f"{SESSION_HEADER}:{session_id}"
        # Always a model: without one, each turn first asks a router model which to use (a
        # second request a turn, to another model).
        return ["-o", "stream-json", "--approval-mode", "yolo", "-m", model or DEFAULT_MODEL]

    def new_session(self, session_id: str, model: str, max_turns: int) -> list[str]:
        return [self.cli, *self._flags(session_id, model), "--session-id", session_id]

    def resume(self, session_id: str, model: str, max_turns: int) -> list[str]:
        return [self.cli, *self._flags(session_id, model), "--resume", session_id]

    def new_session_id(self) -> str | None:
        return str(uuid.uuid4())

    def session_file(self, session_id: str) -> str:
        found = ""
        projects = os.path.join(self.session_home, "tmp")
        for folder, _, names in os.walk(projects):
            if os.path.basename(folder) != "chats":
                continue
            for name in names:
                if name.startswith("session-") and name.endswith(f"-{session_id[:8]}.jsonl"):
                    found = max(found, os.path.join(folder, name))
        return found

    def store_match(self, session_id: str) -> Callable[[str], bool]:
        ending = f"-{session_id[:8]}.jsonl"
        return lambda relative: (
            relative.startswith("tmp")
            and os.path.basename(os.path.dirname(relative)) == "chats"
            and relative.endswith(ending)
        )

    def started(self) -> None:
        super().started()
        self._text = []
        self._said = ""

    def process_starting(self, session: str, mode: str, path: str) -> None:
        """A resumed session's answers so far were spent before this process."""
        if path and os.path.exists(path):
            for line in JsonLines(path, 0, self.session_needles).new():
                if line.get("type") == "gemini" and line.get("id"):
                    self.spend.earlier(str(line["id"]))

    def session_lines(self, lines: Iterable[dict[str, Any]], session: str) -> None:
        """Each answer's tokens, as it ended."""
        for line in lines:
            tokens = line.get("tokens")
            if line.get("type") == "gemini" and line.get("id") and isinstance(tokens, dict):
                self.spend.answer(str(line["id"]), str(line.get("model") or ""), tokens)

    def process_ended(
        self, returncode: int, stderr_tail: str, finished: Finished | None
    ) -> Finished | None:
        """A session it cannot resume, and a quota's end, are said on stderr only."""
        if finished is None and "error resuming session" in stderr_tail.lower():
            return Finished(SESSION_MISSING, stderr_tail.strip().splitlines()[-1])
        if finished is not None and finished.outcome == USAGE_LIMIT:
            retry = RETRY_IN.findall(stderr_tail)
            if retry and finished.resets_at is None:
                finished.resets_at = time.time() + float(retry[-1])
        return finished

    def parse(self, line: dict[str, Any]) -> list[Event]:
        kind = line.get("type")
        if kind == "init" and line.get("session_id"):
            return [SessionStarted(str(line["session_id"]))]
        if kind == "message" and line.get("role") == "assistant":
            self._text.append(str(line.get("content") or ""))
            return []
        if kind == "tool_use":
            events = self._flush()
            name = str(line.get("tool_name") or "?")
            value = line.get("parameters")
            call_id = str(line.get("tool_id") or "")
            events.append(ToolStarted(call_id, name, call_key(name, value), label(name, value)))
            return events
        if kind == "tool_result":
            return [ToolFinished(str(line.get("tool_id") or ""), line.get("status") == "error")]
        if kind == "result":
            events = self._flush()
            events.append(self._result(line))
            return events
        return []

    def _flush(self) -> list[Event]:
        text = "".join(self._text)
        self._text = []
        if not text.strip():
            return []
        self._said = text
        return [AssistantText(text)]

    def _result(self, line: dict[str, Any]) -> Finished:
        if line.get("status") == "success":
            return Finished(SUCCESS, self._said)
        error = line.get("error")
        error = error if isinstance(error, dict) else {}
        kind = str(error.get("type") or "")
        message = str(error.get("message") or kind or "failed")
        if kind in TURN_LIMIT_ERRORS:
            return Finished(MAX_TURNS, message)
        if QUOTA_TEXT.search(message):  # not retried by it: a daily quota, until its reset
            return Finished(USAGE_LIMIT, message, None, 429)
        lowered = message.lower()
        if any(word in lowered for word in CONTEXT_WORDS) or "input token count" in lowered:
            return Finished(CONTEXT_FULL, message)
        status = _status(message)
        if status in RETRYABLE_STATUSES:
            return Finished(API_ERROR, message, None, status)
        return Finished(ERROR, message, None, status)


def _status(message: str) -> int | None:
    """The HTTP status an API error's message names, by number or by the API's word."""
    for word, number in API_STATUSES.items():
        if word in message:
            return number
    match = STATUS_NUMBER.search(message)
    return int(match.group(1)) if match else None
