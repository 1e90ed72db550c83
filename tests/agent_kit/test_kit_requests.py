"""The agent kit's requests to its supervisor, as files: `ask` writes its question into the
requests file beside the checkpoint and returns the answer file's text (also when the answer
was there before it asked: a restarted agent); `wait_until`, `report_usage` and `finish` write
what the supervisor reads (overnight.core.agent_requests, the same parser the worker uses), and no
save of the checkpoint, the kit's or the agent's own, drops them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from activities.sandbox_base.setup import KIT_DIR
from overnight.core.agent_requests import (
    MAX_REQUESTS_BYTES,
    REQUESTS_FILE,
    AgentRequests,
    requests_in,
)
from tests.waits import CAP

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
    """What the requests file beside the checkpoint asks, read as the worker reads it."""
    try:
        return requests_in(json.loads((tmp_path / REQUESTS_FILE).read_text()))
    except (OSError, ValueError):
        return None


def _wait_for(probe: Any, timeout: float = CAP) -> Any:
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
        out, _ = asker.communicate(timeout=CAP)
    finally:
        asker.kill()
    assert (asked.question, asked.choices) == ("Ship it?", ["yes", "no"])
    assert asked.id.startswith("q3-")
    assert out.strip() == "yes"
    # Answered: the question is gone from the requests file; the checkpoint is the agent's.
    found = _requests(tmp_path)
    assert found is not None and found.ask is None
    assert json.loads((tmp_path / "checkpoint.json").read_text())["step"] == 3


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
        timeout=CAP,
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
cp.save()  # the kit's save of the checkpoint leaves the requests be
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
        timeout=CAP,
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
        # The supervisor's answer file, as activities.sandbox.kit_requests writes it.
        _answer(tmp_path, asked.id, "no")
        out, _ = asker.communicate(timeout=CAP)
    finally:
        asker.kill()
    assert (asked.id, asked.choices) == ("q1-apply-migration", ["yes", "no"])
    assert out.strip() == "answered: no"


def test_ask_raises_at_once_for_a_question_the_supervisor_would_refuse(tmp_path: Path) -> None:
    """Refused, the question would never reach a person and `ask` would wait forever."""
    from overnight.core import agent_requests

    cases = ['""', '" "', '"x" * 4001', '"Go?", ["a"] * 21', '"Go?", [""]', '"Go?", ["a" * 201]']
    for case in cases:
        script = f"from overnight_agent import ask\nask({case}, poll=0.01)"
        done = subprocess.run(
            [sys.executable, "-c", script],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=CAP,
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


OWN_WAY = """
import json, os, threading, time
from overnight_agent import ask, finish, report_usage, wait_until

path = os.environ["OVERNIGHT_CHECKPOINT"]
state = {"step": 0}
saving = threading.Lock()  # its two threads share one temporary file


def save():  # the agent's own way: json.dump and a rename, no key of the kit's
    with saving:
        with open(path + ".tmp", "w") as out:
            json.dump(state, out)
        os.rename(path + ".tmp", path)


def keep_saving():  # and a thread that saves while the kit's calls block
    while True:
        save()
        time.sleep(0.01)


threading.Thread(target=keep_saving, daemon=True).start()
report_usage(1.5, input_tokens=7, model="m")
state["step"] = 1
save()
soon = time.time() + 0.5
wait_until(soon, "window", poll=0.05)
state["step"] = 2
save()
print(ask("Ship it?", ["yes", "no"], poll=0.05), flush=True)
finish("done", {"pr": "https://example.test/pr/2"})
state["step"] = 3
save()
"""


def test_requests_survive_an_agent_that_writes_its_checkpoint_its_own_way(tmp_path: Path) -> None:
    agent = subprocess.Popen(
        [sys.executable, "-c", OWN_WAY], env=_env(tmp_path), stdout=subprocess.PIPE, text=True
    )
    try:
        waited = _wait_for(lambda: (r := _requests(tmp_path)) and r.wait)
        asked = _wait_for(lambda: (r := _requests(tmp_path)) and r.ask)
        time.sleep(0.1)  # the agent's thread saves its checkpoint meanwhile
        still = _requests(tmp_path)
        _answer(tmp_path, asked.id, "yes")
        out, _ = agent.communicate(timeout=CAP)
    finally:
        agent.kill()
    assert waited.reason == "window"
    assert still is not None and still.ask == asked and still.usage is not None
    assert out.strip() == "yes"
    found = _requests(tmp_path)
    assert found is not None and found.refused is None and found.ask is None
    assert found.usage is not None and (found.usage.usd, found.usage.input_tokens) == (1.5, 7)
    assert found.finish is not None and found.finish.values == {"pr": "https://example.test/pr/2"}
    # The checkpoint is the agent's own, with no key of the kit's in it.
    assert json.loads((tmp_path / "checkpoint.json").read_text()) == {"step": 3}


def test_finish_is_clipped_to_the_supervisors_limits_and_the_file_to_its_cap(
    tmp_path: Path,
) -> None:
    script = """
from overnight_agent import finish
finish("s" * 100_000, {f"out{i}": "\\U0001F600" * 10_000 for i in range(50)})
"""
    done = subprocess.run(
        [sys.executable, "-c", script], env=_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / REQUESTS_FILE).stat().st_size <= MAX_REQUESTS_BYTES
    found = _requests(tmp_path)
    assert found is not None and found.finish is not None and found.refused is None
    assert len(found.finish.values) == 20
    assert all(len(value) == 2000 for value in found.finish.values.values())
    assert len(found.finish.summary) == 4000


def test_a_new_process_keeps_the_results_handed_over_not_what_the_last_one_asked(
    tmp_path: Path,
) -> None:
    first = """
from overnight_agent import finish, report_usage
report_usage(2.0)
finish("first", {"a": "1"})
"""
    second = "from overnight_agent import report_usage\nreport_usage(0.1)\n"
    for script in (first, second):
        done = subprocess.run(
            [sys.executable, "-c", script], env=_env(tmp_path), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    found = _requests(tmp_path)
    assert found is not None and found.usage is not None and found.finish is not None
    assert found.usage.usd == 0.1  # this process's stream (the last one's was read by then)
    assert found.finish.values == {"a": "1"}
