"""The real Gemini CLI (0.61.0), headless, against the fake's Gemini API: a shell call and a
file write carried back as tool results, a resumed session that sends its earlier turns again,
a 503 and a 429 retried, a daily quota that ends the run.

The CLI is the pinned one, installed once per session by overnight's installer
(tests/agent_clis/conftest.py), its `bundle/gemini.js` run with `node`. Each run has its own
`GEMINI_CLI_HOME` (its settings: the API-key auth, no telemetry, no usage statistics),
`TMPDIR` and workspace; the fake is its `GOOGLE_GEMINI_BASE_URL`, and
`GEMINI_CLI_CUSTOM_HEADERS` gives it the `x-overnight-session-id` header the fake reads as the
session (the CLI sends none of its own).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakes.model_api import (
    ApiError,
    FakeModelApi,
    Shell,
    WriteFile,
    carries,
    rate_limited,
    text,
    tools,
    usage_limit,
)
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.waits import CAP

MODEL = "gemini-2.5-flash"
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
}


@pytest.fixture
def gemini_js(installed_cli: Callable[[str], Installed]) -> Path:  # noqa: F811
    """The pinned Gemini CLI's script, installed for the session."""
    return installed_cli("gemini").executable


@dataclass
class Run:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    seconds: float

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("type") == kind]

    def answer(self) -> str:
        said = self.of("message")
        return "".join(e["content"] for e in said if e.get("role") == "assistant")

    def describe(self) -> str:
        return f"exit {self.returncode}; events {self.events[-3:]}; stderr {self.stderr[-2000:]}"


class GeminiCli:
    """One workspace and home of the CLI, pointed at `fake`; `session` is the header's id."""

    def __init__(self, root: Path, fake: FakeModelApi, script: Path) -> None:
        node = shutil.which("node")
        assert node, "node is not on PATH"
        self.node = node
        self.script = script
        self.home, self.work, self.tmp = root / "home", root / "work", root / "tmp"
        for folder in (self.home / ".gemini", self.work, self.tmp):
            folder.mkdir(parents=True)
        (self.home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
        self.fake = fake
        self.session = str(uuid.uuid4())

    def run(self, *arguments: str) -> Run:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "GEMINI_CLI_HOME": str(self.home),
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_API_KEY": "fake",
            "GOOGLE_GEMINI_BASE_URL": self.fake.gemini_base_url,
            "GEMINI_CLI_CUSTOM_HEADERS": f"x-overnight-session-id:{self.session}",
            "TMPDIR": str(self.tmp),
        }
        command = [self.node, str(self.script), *arguments, "-m", MODEL, "-o", "stream-json"]
        started = time.monotonic()
        done = subprocess.run(
            [*command, "--approval-mode", "yolo"],
            cwd=self.work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=2 * CAP,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        return Run(done.returncode, events, done.stderr, time.monotonic() - started)

    def session_files(self) -> list[Path]:
        """Where the CLI keeps its sessions: `.gemini/tmp/<project>/chats/session-*.jsonl`."""
        return sorted((self.home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))


def test_a_shell_call_and_a_write_are_carried_back(tmp_path: Path, gemini_js: Path) -> None:
    script = [
        tools(Shell("printf shelled > a.txt && cat a.txt"), label="shell"),
        tools(
            WriteFile(str(tmp_path / "work" / "b.txt"), "written\n"),
            label="write",
            input_tokens=200,
            output_tokens=30,
            cache_read_tokens=50,
        ),
        text("done", label="final", input_tokens=300, output_tokens=5),
    ]
    with FakeModelApi(script) as fake:
        cli = GeminiCli(tmp_path, fake, gemini_js)
        run = cli.run("-p", "Write a.txt with the shell, then b.txt.")
        requests = fake.requests()

    assert run.returncode == 0, run.describe()
    assert (cli.work / "a.txt").read_text() == "shelled"
    assert (cli.work / "b.txt").read_text() == "written\n"
    assert [r.label for r in requests] == ["shell", "write", "final"]
    assert fake.script.unmatched == [] and fake.unrouted == []
    assert {(r.path, r.query, r.model) for r in requests} == {
        (f"/v1beta/models/{MODEL}:streamGenerateContent", "alt=sse", MODEL)
    }
    assert fake.session_ids() == [cli.session]
    assert {"run_shell_command", "write_file", "read_file"} <= set(requests[0].tool_names)
    # Each request after the first carries the results of the calls the one before made.
    for before, after in zip(requests, requests[1:], strict=False):
        assert [r.call_id for r in after.last_tool_results()] == list(before.call_ids)
    assert "shelled" in requests[1].last_tool_results()[0].output
    assert "b.txt" in requests[2].last_tool_results()[0].output
    assert "Write a.txt with the shell" in requests[2].text()

    kinds = [event["type"] for event in run.events]
    assert kinds == ["init", "message"] + ["tool_use", "tool_result"] * 2 + ["message", "result"]
    assert run.answer() == "done"
    used = run.of("tool_use")
    assert [(e["tool_name"], e["tool_id"]) for e in used] == [
        ("run_shell_command", "run_shell_command__call_fake_0001_0"),
        ("write_file", "write_file__call_fake_0002_0"),
    ]
    assert used[0]["parameters"]["command"] == "printf shelled > a.txt && cat a.txt"
    assert [e["status"] for e in run.of("tool_result")] == ["success", "success"]
    # The result adds up the usageMetadata of the three answers.
    result = run.of("result")[0]
    assert result["status"] == "success"
    stats = result["stats"]
    expected = {"input_tokens": 650, "output_tokens": 55, "total_tokens": 705, "cached": 50}
    assert {key: stats[key] for key in expected} == expected
    assert stats["input"] == 600 and stats["tool_calls"] == 2
    assert stats["models"][MODEL]["input_tokens"] == 650
    session_id = run.of("init")[0]["session_id"]
    assert [path.name.endswith(f"-{session_id[:8]}.jsonl") for path in cli.session_files()] == [
        True
    ]


def test_a_resumed_session_sends_its_earlier_turns_again(tmp_path: Path, gemini_js: Path) -> None:
    script = [
        text("noted: banana", label="first"),
        text("banana it is", label="resumed", when=carries("noted: banana")),
    ]
    with FakeModelApi(script) as fake:
        cli = GeminiCli(tmp_path, fake, gemini_js)
        first = cli.run("--session-id", cli.session, "-p", "Remember banana.")
        assert first.returncode == 0, first.describe()
        resumed = cli.run("--resume", cli.session, "-p", "Which fruit?")
        requests = fake.requests()

    assert resumed.returncode == 0, resumed.describe()
    assert [r.label for r in requests] == ["first", "resumed"]
    assert [run.of("init")[0]["session_id"] for run in (first, resumed)] == [cli.session] * 2
    assert (first.answer(), resumed.answer()) == ("noted: banana", "banana it is")
    items = requests[1].items()
    assert [item["role"] for item in items] == ["user", "model", "user"]
    assert items[0]["parts"][-1] == {"text": "Remember banana."}
    assert items[1]["parts"] == [{"text": "noted: banana"}]
    assert items[2]["parts"] == [{"text": "Which fruit?"}]
    # The resumed run writes on in the session's first file; it also starts a file of its own
    # (named by its start, the same id): the same file when both start in the same minute.
    files = cli.session_files()
    assert files and all(path.name.endswith(f"-{cli.session[:8]}.jsonl") for path in files)
    kept = files[0].read_text()
    assert "Remember banana." in kept and "noted: banana" in kept and "Which fruit?" in kept


@pytest.mark.long
def test_a_503_and_a_429_are_retried(tmp_path: Path, gemini_js: Path) -> None:
    overloaded = ApiError(
        status=503, code="UNAVAILABLE", message="The model is overloaded.", label="503"
    )
    script = [overloaded, rate_limited(1, label="429"), text("after retries", label="ok")]
    with FakeModelApi(script) as fake:
        run = GeminiCli(tmp_path, fake, gemini_js).run("-p", "Say something.")
        requests = fake.requests()

    assert run.returncode == 0, run.describe()
    assert run.answer() == "after retries"
    assert [(r.label, r.status) for r in requests] == [("503", 503), ("429", 429), ("ok", 200)]
    assert requests[0].body["contents"] == requests[2].body["contents"]  # the same request again
    # Its backoff starts at 5 s (less 30 % jitter) and doubles.
    arrivals = [r.received_at for r in requests]
    gaps = [after - before for before, after in zip(arrivals, arrivals[1:], strict=False)]
    assert gaps[0] >= 3.5 and gaps[1] >= 7, gaps
    assert "Attempt 1 failed with status 503" in run.stderr


def test_a_spent_daily_quota_ends_the_run(tmp_path: Path, gemini_js: Path) -> None:
    with FakeModelApi([usage_limit(resets_in=3600, label="limit")]) as fake:
        run = GeminiCli(tmp_path, fake, gemini_js).run("-p", "Say something.")
        requests = fake.requests()

    assert [r.label for r in requests] == ["limit"]  # not retried
    assert run.returncode == 429 % 256, run.describe()  # it exits with the HTTP status
    (result,) = run.of("result")
    assert result["status"] == "error"
    assert "exhausted your daily quota" in result["error"]["message"]
