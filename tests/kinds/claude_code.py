"""Claude Code: what the tests know of it, and how tests/agent_clis runs it headless (its
variables as ../shared/reference/coding-agents.md gives them, `--output-format stream-json`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from fakes.model_api import FakeModelApi
from tests.agent_clis.clis import FAKE_KEY, Driver, Finished
from tests.kinds.base import KindFacts


class ClaudeCode(Driver):
    binary_name = "claude"

    def first(self, prompt: str) -> list[str]:
        return [self.sandbox.executable_inside, "-p", prompt, *self._flags()]

    def resume(self, session_id: str, prompt: str) -> list[str]:
        return [
            self.sandbox.executable_inside,
            "--resume",
            session_id,
            "-p",
            prompt,
            *self._flags(),
        ]

    def _flags(self) -> list[str]:
        return [
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            "--max-turns",
            "20",
        ]

    def env(self) -> dict[str, str]:
        credential = "CLAUDE_CODE_OAUTH_TOKEN" if self.subscription else "ANTHROPIC_API_KEY"
        env = {
            "ANTHROPIC_BASE_URL": self.fake.anthropic_base_url,
            credential: FAKE_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "2",
        }
        if self.sandbox.uid is None and os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # root: --dangerously-skip-permissions refuses otherwise
        return env

    def session_files(self) -> list[Path]:
        return sorted((self.sandbox.home / ".claude" / "projects").glob("*/*.jsonl"))

    def finished(self, lines: list[dict[str, Any]]) -> tuple[str, str]:
        results = [line for line in lines if line.get("type") == "result"]
        assert results, f"no result line in {lines[-3:]}"
        result = results[-1]
        assert result.get("subtype") == "success" and result.get("is_error") is False, result
        return str(result["session_id"]), str(result.get("result", ""))

    def usage_limit_reported(self, finished: Finished, resets_at: int) -> None:
        """In subscription mode it prints its `rate_limit_event` with the reset time."""
        events = [line for line in finished.lines if line.get("type") == "rate_limit_event"]
        info = events[0]["rate_limit_info"]
        assert (info["status"], info["resetsAt"], info["rateLimitType"]) == (
            "rejected",
            resets_at,
            "five_hour",
        )
        result = finished.lines[-1]
        # "success" with is_error: only is_error says it failed.
        assert result["type"] == "result" and result["is_error"] is True
        assert result["api_error_status"] == 429 and "5-hour limit" in result["result"]


def _tool_result(call_id: str) -> re.Pattern[str]:
    return re.compile(rf'"tool_use_id":\s*"{re.escape(call_id)}"')


def _base_url(fake: FakeModelApi) -> str:
    return fake.anthropic_base_url


FACTS = KindFacts(
    kind="claude-code",
    driver=ClaudeCode,
    credential_env="ANTHROPIC_API_KEY",
    binary=ClaudeCode.binary_name,
    session_files=".claude/projects/*/*.jsonl",
    base_url=_base_url,
    shell_tool="Bash",
    mcp_step_label="mcp__{server}__{tool}",
    interrupted="Tool call interrupted",
    tool_result_stored=_tool_result,
    reports_own_usd=True,
    retries_quickly=True,
    tool_outlives_cli=True,
    stops_at_max_turns=True,
    mcp_through_tool_search=False,
    # One retry of its own: the adapter's backoffs come soon.
    adapter_env=(("CLAUDE_CODE_MAX_RETRIES", "1"),),
    # Subscription mode: the CLI says when the usage window resets.
    usage_limit_env=(("ANTHROPIC_API_KEY", None), ("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat-fake")),
    subscription_env="CLAUDE_CODE_OAUTH_TOKEN",
)
