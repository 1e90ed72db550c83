"""`overnight logs --follow` follows the run, not only its output (issue 51): the real CLI, as a
subprocess, against the session's dev server and a worker in this process. A question, a run
that needs a person (why, and the command that lifts it), and the end with its reason (a
cancel's too) are printed as they happen, between the agent's lines, each on one line with
the agent's words escaped."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.cli.logs_news import news
from overnight.core.models import Budget, RunSpec, RunStatus
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from tests.cli.test_cli import OVERNIGHT
from tests.live import in_process_worker, new_run_id, nothing_left_running

# Asks a question (its text holds an escape sequence), says the answer, then crashes: with no
# restart in its budget the run needs a person.
AGENT = """\
import sys
from overnight_agent import Checkpoint, ask

checkpoint = Checkpoint.load()
print("before the question", flush=True)
answer = ask("Ship it\\x1b[2J?", ["yes", "no"])
print(f"told {answer}", flush=True)
checkpoint.step, checkpoint.next = 1, "crash"
checkpoint.save()
sys.exit(3)
"""
QUESTION = "Ship it\\x1b[2J? (one of: yes, no)"  # as a terminal is shown it


def _spec(run_id: str, root: Path, **changes: Any) -> RunSpec:
    agent = root / "agent"
    agent.mkdir(exist_ok=True)
    (agent / "main.py").write_text(AGENT)
    origin = make_origin(root / run_id).origin
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(origin, "local"),
        "agent_dir": str(agent),
        "command": "python3 /workspace/agent/main.py",
        "poll_seconds": 1,
        "stall_seconds": 120,
        "sandbox_timeout_seconds": 300,
        "budget": {"max_restarts": 0},
        **changes,
    }
    return RunSpec.model_validate(fields)


class Follower:
    """`overnight logs RUN --follow`, its lines read as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    @classmethod
    async def of(cls, server: DevServer, run_id: str) -> Follower:
        process = await asyncio.create_subprocess_exec(
            str(OVERNIGHT),
            "--address",
            server.address,
            "logs",
            run_id,
            "--follow",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def until(self, wanted: Callable[[str], bool], cap: float = 120) -> int:
        """Read lines until one is `wanted` (within a generous cap); its index."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + cap
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no such line in {cap} s; read: {self.lines}"
            raw = await asyncio.wait_for(self.process.stdout.readline(), left)
            assert raw, f"the follower ended first; read: {self.lines}"
            self.lines.append(raw.decode().rstrip("\n"))
            if wanted(self.lines[-1]):
                return len(self.lines) - 1

    async def end(self) -> int:
        rest, _ = await asyncio.wait_for(self.process.communicate(), 120)
        self.lines += rest.decode().splitlines()
        return self.process.returncode or 0


@pytest.mark.timeout(300)
async def test_logs_follow_prints_the_question_the_need_for_a_person_and_the_end_as_they_come(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("follow-news")
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "follow-news") as queue,
    ):
        runs.append(run_id)
        await api.start_run(dev_client, _spec(run_id, tmp_path), task_queue=queue)
        follower = await Follower.of(dev_server, run_id)
        asked = await follower.until(lambda line: "waits for an answer" in line)
        assert follower.lines[asked] == (
            f"=== {run_id} waits for an answer: {QUESTION}; overnight answer {run_id} TEXT ==="
        )
        # Printed while the run waits: only now is it answered.
        await api.answer_question(dev_client, run_id, "yes")
        stuck = await follower.until(lambda line: line.startswith(f"=== {run_id} needs you: "))
        assert (
            follower.lines[stuck] == f"=== {run_id} needs you: restart budget used up (0 of 0); "
            f"overnight extend {run_id} --restarts N ==="
        )

        # One who begins to follow now is told at once why the run is quiet.
        late = await Follower.of(dev_server, run_id)
        told = await late.until(lambda line: line.startswith(f"=== {run_id} needs you: "))
        assert late.lines[told] == follower.lines[stuck]

        await api.cancel_run(dev_client, run_id, "seen enough")
        assert await follower.end() == 0 and await late.end() == 0

    lines = follower.lines
    assert lines.index("before the question") < asked < lines.index("told yes") < stuck
    assert lines[-1] == f"=== run {run_id} ended: cancelled: seen enough ==="
    assert late.lines[-1] == lines[-1]


@pytest.mark.timeout(180)
async def test_logs_of_a_run_that_failed_at_start_say_the_reason(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("follow-failed")
    spec = _spec(run_id, tmp_path, agent_dir=str(tmp_path / "nowhere"))
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "follow-failed") as queue,
    ):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(api.wait_result(dev_client, run_id), 120)
        follower = await Follower.of(dev_server, run_id)
        assert await follower.end() == 0
        plain = await asyncio.create_subprocess_exec(
            str(OVERNIGHT), "--address", dev_server.address, "logs", run_id,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, said = await asyncio.wait_for(plain.communicate(), 120)
    why = (
        f"run {run_id} cannot start: field agent_dir: {tmp_path}/nowhere is not a folder on "
        "this worker; no retry can fix this: fix the spec (or the worker) and start the run again"
    )
    assert follower.lines[-1] == f"=== run {run_id} ended: failed: {why} ==="
    # Without --follow too: the reason, not a sandbox "gone" that never was (issue 51).
    assert plain.returncode == 1
    assert said.decode() == (
        f"overnight: run {run_id} failed before its agent ran, so it has no output: {why}\n"
    )


def _status(state: str, **fields: Any) -> RunStatus:
    return RunStatus.model_validate(
        {"run_id": "r", "state": state, "attempt": 1, "budget": Budget()}
        | {"started_at": "2026-01-01T00:00:00Z"}
        | fields
    )


def test_what_a_follower_is_told_of_the_runs_own_changes() -> None:
    running, restarting = _status("running"), _status("restarting")
    attention = _status("needs_attention", attention_reason="out of\nrestarts \x1b]0;x\x07")
    # The attempt lines say starts and restarts; nothing more is printed for them.
    assert news(None, running) == [] and news(running, restarting) == []
    assert news(running, attention) == [
        ("needs_attention", "=== r needs you: out of restarts \\x1b]0;x\\x07 ===")
    ]
    assert news(None, attention) == news(running, attention)  # a late follower is told too
    assert news(attention, attention) == []
    assert news(attention, restarting) == [("restarting", "=== r goes on: restarting ===")]
    paused = _status(
        "running", talk={"waiting_until": "2026-01-02T03:04:00Z", "waiting_reason": "usage"}
    )
    assert news(running, paused) == [
        ("paused", "=== r is paused until 2026-01-02 03:04 UTC: usage ===")
    ]
    for ending in ("finishing", "finished"):
        assert news(paused, _status(ending)) == []  # the end line says it
