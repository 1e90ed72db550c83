"""Codex: what the tests know of it, and how tests/agent_clis runs it headless (its
`config.toml` as ../shared/reference/coding-agents.md gives it, `exec --json`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from fakes.model_api import FakeModelApi
from tests.agent_clis.clis import FAKE_KEY, Driver, Finished
from tests.kinds.base import KindFacts


class Codex(Driver):
    binary_name = "codex"

    def first(self, prompt: str) -> list[str]:
        return [self.sandbox.executable_inside, "exec", *self._flags(), prompt]

    def resume(self, session_id: str, prompt: str) -> list[str]:
        return [
            self.sandbox.executable_inside,
            "exec",
            "resume",
            *self._flags(),
            session_id,
            prompt,
        ]

    def _flags(self) -> list[str]:
        return ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]

    @property
    def codex_home(self) -> Path:
        return self.sandbox.home / ".codex"

    def env(self) -> dict[str, str]:
        self._write_config()
        return {"CODEX_HOME": f"{self.sandbox.home_inside}/.codex", "FAKE_API_KEY": FAKE_KEY}

    def _write_config(self) -> None:
        self.codex_home.mkdir(exist_ok=True)
        config = self.codex_home / "config.toml"
        config.write_text(
            "\n".join(
                [
                    'model = "gpt-5.5-codex"',
                    'model_provider = "fake"',
                    "[model_providers.fake]",
                    'name = "fake"',
                    f'base_url = "{self.fake.openai_base_url}"',
                    'wire_api = "responses"',
                    'env_key = "FAKE_API_KEY"',
                    "request_max_retries = 2",
                    "stream_max_retries = 2",
                    "stream_idle_timeout_ms = 60000",
                    "[analytics]",
                    "enabled = false",
                    "[features]",
                    "plugins = false",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        if self.sandbox.uid is not None:
            for path in (self.codex_home, config):
                os.chown(path, self.sandbox.uid, self.sandbox.uid)

    def session_files(self) -> list[Path]:
        return sorted((self.codex_home / "sessions").glob("*/*/*/rollout-*.jsonl"))

    def finished(self, lines: list[dict[str, Any]]) -> tuple[str, str]:
        kinds = [line.get("type") for line in lines]
        assert "turn.completed" in kinds and "turn.failed" not in kinds, lines[-3:]
        thread = [line["thread_id"] for line in lines if line.get("type") == "thread.started"]
        messages = [
            line["item"].get("text", "")
            for line in lines
            if line.get("type") == "item.completed"
            and line.get("item", {}).get("type") == "agent_message"
        ]
        assert thread and messages, lines[-3:]
        return str(thread[0]), str(messages[-1])

    def usage_limit_reported(self, finished: Finished, resets_at: int) -> None:
        """It fails the turn and records the reset in its rollout's `rate_limits`."""
        failed = [line for line in finished.lines if line.get("type") == "turn.failed"]
        assert "usage limit" in failed[0]["error"]["message"]
        assert self.session_mentions(f'"resets_at":{resets_at}')
        assert self.session_mentions("usage_limit_exceeded")


def _tool_result(call_id: str) -> re.Pattern[str]:
    return re.compile(rf'"function_call_output".*"call_id":\s*"{re.escape(call_id)}"')


def _base_url(fake: FakeModelApi) -> str:
    return fake.openai_base_url


FACTS = KindFacts(
    kind="codex",
    driver=Codex,
    credential_env="OPENAI_API_KEY",
    binary=Codex.binary_name,
    session_files=".codex/sessions/**/*.jsonl",
    base_url=_base_url,
    shell_tool="shell",
    mcp_step_label="{server}.{tool}",
    interrupted="aborted",
    tool_result_stored=_tool_result,
    reports_own_usd=False,
    # Its own retries of a 529 or an unreachable API take minutes at its default settings.
    retries_quickly=False,
    tool_outlives_cli=False,  # its tool's shell dies with it
    stops_at_max_turns=False,
    mcp_through_tool_search=True,
    priced_model="gpt-6",  # its default model at its pinned version: gpt-6.2-sol
)
