"""The agent kit's requests to its supervisor, as files: `ask` writes its question into the
checkpoint and returns the answer file's text (also when the answer was there before it asked:
a restarted agent); `wait_until`, `report_usage` and `finish` write what the supervisor reads
(overnight.agent_requests, the same parser the worker uses); a later `Checkpoint.save` keeps
them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from activities.sandbox_setup import KIT_DIR
from overnight.agent_requests import AgentRequests, requests_of

ASKER = """
import sys
from overnight_agent import Checkpoint, ask
cp = Checkpoint.load()
cp.step = 3
cp.save()
print(ask("Ship it?", ["yes", "no"], poll=0.05), flush=True)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(KIT_DIR),
        "OVERNIGHT_CHECKPOINT": str(tmp_path / "checkpoint.json"),
        "OVERNIGHT_ANSWERS_DIR": str(tmp_path / "answers"),
        "OVERNIGHT_ATTEMPT": "2",
    }


def _requests(tmp_path: Path) -> AgentRequests | None:
    try:
        return requests_of(json.loads((tmp_path / "checkpoint.json").read_text()))
    except (OSError, ValueError):
        return None


def _wait_for(probe: Any, timeout: float = 10) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("not there in time")


def _answer(tmp_path: Path, request_id: str, text: str) -> None:
    (tmp_path / "answers").mkdir(exist_ok=True)
    (tmp_path / "answers" / f"{request_id}.json").write_text(
        json.dumps({"id": request_id, "answer": text})
    )


def test_ask_writes_its_question_and_returns_the_answer_file(tmp_path: Path) -> None:
    asker = subprocess.Popen(
        [sys.executable, "-c", ASKER], env=_env(tmp_path), stdout=subprocess.PIPE, text=True
    )
    try:
        asked = _wait_for(lambda: (r := _requests(tmp_path)) and r.ask)
        assert asker.poll() is None  # blocked, waiting
        _answer(tmp_path, "someone-else", "no")  # another request's answer is not taken
        time.sleep(0.2)
        assert asker.poll() is None
        _answer(tmp_path, asked.id, "yes")
        out, _ = asker.communicate(timeout=10)
    finally:
        asker.kill()
    assert (asked.question, asked.choices) == ("Ship it?", ["yes", "no"])
    assert asked.id.startswith("q3-")
    assert out.strip() == "yes"
    # Answered: the question is gone from the checkpoint; the agent's own fields stay.
    saved = json.loads((tmp_path / "checkpoint.json").read_text())
    assert saved["step"] == 3 and "ask" not in saved["overnight"]


def test_a_restarted_agent_finds_the_answer_already_given(tmp_path: Path) -> None:
    first = subprocess.Popen([sys.executable, "-c", ASKER], env=_env(tmp_path))
    asked = _wait_for(lambda: (r := _requests(tmp_path)) and r.ask)
    first.kill()
    first.wait()
    _answer(tmp_path, asked.id, "no")
    again = subprocess.run(
        [sys.executable, "-c", ASKER],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert again.stdout.strip() == "no"


def test_usage_finish_and_wait_until_are_written_for_the_supervisor(tmp_path: Path) -> None:
    script = """
import datetime, json, sys
from overnight_agent import Checkpoint, finish, report_usage, wait_until
cp = Checkpoint.load()
report_usage(0.5, input_tokens=10, output_tokens=2, model="m")
report_usage(1.25, input_tokens=20, output_tokens=4, model="m")
cp.step = 1
cp.save()  # the agent's own save keeps what the kit asked
assert wait_until(0, "long ago") is True
soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=0.6)
print(wait_until(soon, "window", poll=0.05), flush=True)
finish("done", {"pr": "https://example.test/pr/1", "count": 3})
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
    found = _requests(tmp_path)
    assert found is not None and found.refused is None
    assert found.usage is not None
    assert (found.usage.usd, found.usage.input_tokens, found.usage.model) == (1.25, 20, "m")
    assert found.usage.stream.startswith("a2-p")
    assert found.wait is None  # over: taken back
    assert found.finish is not None
    assert found.finish.values == {"pr": "https://example.test/pr/1", "count": "3"}


def test_a_wait_until_is_written_with_its_time_and_reason(tmp_path: Path) -> None:
    until = datetime.now(UTC) + timedelta(hours=5)
    script = f"""
from overnight_agent import wait_until
wait_until({until.timestamp()!r}, "usage window resets", poll=0.05)
"""
    waiter = subprocess.Popen([sys.executable, "-c", script], env=_env(tmp_path))
    try:
        wait = _wait_for(lambda: (r := _requests(tmp_path)) and r.wait)
    finally:
        waiter.kill()
        waiter.wait()
    assert wait.reason == "usage window resets"
    assert abs((wait.until - until).total_seconds()) < 1
    assert wait.id.startswith("w0-")


PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-an-agent.md"


def _docs_shell_block() -> str:
    text = PAGE.read_text()
    start = text.index("```bash\n", text.index("In bash (`tests/agent_kit/test_kit_requests.py`"))
    return text[start + len("```bash\n") : text.index("```\n", start + 8)]


def test_the_docs_shell_example_asks_and_reads_the_answer_the_supervisor_writes(
    tmp_path: Path,
) -> None:
    block = _docs_shell_block().replace("sleep 1", "sleep 0.05")
    asker = subprocess.Popen(
        ["bash", "-c", block], env=_env(tmp_path), stdout=subprocess.PIPE, text=True
    )
    try:
        asked = _wait_for(lambda: (r := _requests(tmp_path)) and r.ask)
        # The supervisor's answer file, as activities.talk_activities writes it.
        _answer(tmp_path, asked.id, "no")
        out, _ = asker.communicate(timeout=10)
    finally:
        asker.kill()
    assert (asked.id, asked.choices) == ("q1-apply-migration", ["yes", "no"])
    assert out.strip() == "answered: no"


def test_ask_raises_at_once_for_a_question_the_supervisor_would_refuse(tmp_path: Path) -> None:
    """Refused, the question would never reach a person and `ask` would wait forever."""
    from overnight import agent_requests

    cases = ['""', '" "', '"x" * 4001', '"Go?", ["a"] * 21', '"Go?", [""]', '"Go?", ["a" * 201]']
    for case in cases:
        script = f"from overnight_agent import ask\nask({case}, poll=0.01)"
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert done.returncode == 1 and "ValueError: ask:" in done.stderr, (case, done.stderr)
        assert _requests(tmp_path) is None  # nothing asked
    script = (
        "import overnight_agent as k\n"
        "print(k.MAX_QUESTION_CHARS, k.MAX_CHOICES, k.MAX_CHOICE_CHARS)"
    )
    limits = subprocess.run(
        [sys.executable, "-c", script], env=_env(tmp_path), capture_output=True, text=True
    )
    said = (
        agent_requests.MAX_QUESTION_CHARS,
        agent_requests.MAX_CHOICES,
        agent_requests.MAX_CHOICE_CHARS,
    )
    assert limits.stdout.split() == [str(n) for n in said]
