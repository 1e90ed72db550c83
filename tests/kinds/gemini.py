"""Gemini CLI: what the tests know of it, and how tests/agent_clis runs it headless
(`-o stream-json --approval-mode yolo`, its settings file with the API key's auth type, and
the session named by `--session-id` and sent to the fake in a header)."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from fakes.model_api import FakeModelApi
from tests.agent_clis.clis import FAKE_KEY, Driver, Finished
from tests.kinds.base import KindFacts

MODEL = "gemini-2.5-flash"


class Gemini(Driver):
    binary_name = "node"  # plain JavaScript: the process is node's
    usage_limit_exit = 429 % 256  # it exits with the API's status

    session_id = ""

    def first(self, prompt: str) -> list[str]:
        self.session_id = str(uuid.uuid4())
        return [*self._command(prompt), "--session-id", self.session_id]

    def resume(self, session_id: str, prompt: str) -> list[str]:
        self.session_id = session_id
        return [*self._command(prompt), "--resume", session_id]

    def _command(self, prompt: str) -> list[str]:
        flags = ["-o", "stream-json", "--approval-mode", "yolo", "-m", MODEL]
        return [self.sandbox.executable_inside, *flags, "-p", prompt]

    @property
    def gemini_home(self) -> Path:
        return self.sandbox.home / ".gemini"

    def env(self) -> dict[str, str]:
        self._write_settings()
        return {
            "GEMINI_CLI_HOME": self.sandbox.home_inside,
            "GEMINI_API_KEY": FAKE_KEY,
            "GOOGLE_GEMINI_BASE_URL": self.fake.gemini_base_url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_CLI_CUSTOM_HEADERS": f"x-overnight-session-id:{self.session_id}",
        }

    def _write_settings(self) -> None:
        self.gemini_home.mkdir(exist_ok=True)
        settings = self.gemini_home / "settings.json"
        values = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "telemetry": {"enabled": False},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }
        settings.write_text(json.dumps(values), encoding="utf-8")
        if self.sandbox.uid is not None:
            for path in (self.gemini_home, settings):
                os.chown(path, self.sandbox.uid, self.sandbox.uid)

    def session_files(self) -> list[Path]:
        return sorted((self.gemini_home / "tmp").glob("*/chats/session-*.jsonl"))

    def finished(self, lines: list[dict[str, Any]]) -> tuple[str, str]:
        results = [line for line in lines if line.get("type") == "result"]
        assert results and results[-1].get("status") == "success", lines[-3:]
        init = [line["session_id"] for line in lines if line.get("type") == "init"]
        said: list[str] = []
        for line in lines:
            if line.get("type") == "tool_use":
                said = []
            elif line.get("type") == "message" and line.get("role") == "assistant":
                said.append(str(line.get("content") or ""))
        assert init, lines[-3:]
        return str(init[0]), "".join(said)

    def usage_limit_reported(self, finished: Finished, resets_at: int) -> None:
        """With an API key, a spent daily quota is a 429 it does not retry: its result says
        so (no reset time: the API's RetryInfo does not reach its output)."""
        result = finished.lines[-1]
        assert result["type"] == "result" and result["status"] == "error", result
        assert "exhausted your daily quota" in result["error"]["message"]


def _tool_result(call_id: str) -> re.Pattern[str]:
    # Its call ids are the tool's name, "__", then the API's call id.
    return re.compile(rf'"functionResponse":\s*\{{"id":\s*"[^"]*{re.escape(call_id)}"')


def _base_url(fake: FakeModelApi) -> str:
    return fake.gemini_base_url


FACTS = KindFacts(
    kind="gemini",
    driver=Gemini,
    credential_env="GEMINI_API_KEY",
    binary=Gemini.binary_name,
    session_files=".gemini/tmp/*/chats/session-*.jsonl",
    base_url=_base_url,
    shell_tool="run_shell_command",
    mcp_step_label="mcp_{server}_{tool}",
    interrupted="cancelled",
    tool_result_stored=_tool_result,
    reports_own_usd=False,
    # Its own retries back off from 5 s to 30 s, ten times: minutes.
    retries_quickly=False,
    tool_outlives_cli=True,  # its shell runs in a process group of its own
    stops_at_max_turns=False,
    mcp_through_tool_search=False,
    records_running_calls=False,
    keeps_unanswered_session=False,
    priced_model="gemini-",
)
