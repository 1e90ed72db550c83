"""The done check's activity on real local sandboxes (bubblewrap where the machine has it):
a check runs in the spec's `cwd` with its `env`; a failure comes back with its tail, redacted,
and is written for the agent; a pass removes that file; a check that hangs is ended at its
limit, saying so; hostile output (megabytes of binary) stays bounded and never hangs it; what
a check left running in the background is ended with it."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from activities.delivery.done_checks import (
    BACKSTOP_SECONDS,
    KILL_AFTER_SECONDS,
    DoneCheckActivities,
)
from activities.models import RunDoneCheckInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from overnight.core.done_check import DONE_CHECK_FILE, FAILED_TAIL_BYTES
from tests.providers.test_behaviour import request

SECRET_NAME = "OVERNIGHT_DONE_CHECK_TEST_SECRET"
SECRET = f"tok-{uuid.uuid4().hex}"


class Box:
    def __init__(self, provider: LocalProvider, sandbox_id: str) -> None:
        self.provider = provider
        self.sandbox_id = sandbox_id
        self.activities = DoneCheckActivities(self._get)

    async def _get(self, _name: str) -> SandboxProvider:
        return self.provider

    def file(self, path: str) -> Path:
        return self.provider.engine.host_path(self.sandbox_id, path)

    def input(self, command: str, *, timeout: float = 30, **fields: object) -> RunDoneCheckInput:
        values: dict[str, object] = {
            "provider": "local",
            "sandbox_id": self.sandbox_id,
            "command": command,
            "index": 0,
            "round": 1,
            "cwd": "/workspace/app",
            "timeout_seconds": timeout,
            "secret_env": [SECRET_NAME],
        }
        values.update(fields)
        return RunDoneCheckInput.model_validate(values)


@pytest_asyncio.fixture
async def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Box]:
    monkeypatch.setenv(SECRET_NAME, SECRET)  # the worker's: redacted from what comes back
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    info, _ = await provider.get_or_create(request(f"done-{uuid.uuid4().hex[:10]}"))
    try:
        await provider.run(info.sandbox_id, "mkdir -p /workspace/app")
        yield Box(provider, info.sandbox_id)
    finally:
        await provider.stop(info.sandbox_id)


async def test_a_failed_check_comes_back_redacted_and_is_written_for_the_agent(box: Box) -> None:
    # The agent (which has the secret) left it where the check prints it.
    await box.provider.write_file(
        box.sandbox_id, "/workspace/app/leak.txt", f"token {SECRET}".encode()
    )
    command = 'pwd; echo "FOO=$FOO"; cat leak.txt; echo; echo "1 failed" >&2; exit 3'
    checked = await box.activities.run_done_check(box.input(command, env={"FOO": "bar"}))

    assert (checked.passed, checked.exit_code, checked.timed_out) == (False, 3, False)
    assert checked.tail.splitlines() == ["/workspace/app", "FOO=bar", "token ***", "1 failed"]
    told = box.file(DONE_CHECK_FILE).read_text()
    assert f"command: {command}" in told and "result: exit 3" in told
    assert "token ***" in told and SECRET not in told


async def test_a_passing_check_removes_the_last_failure(box: Box) -> None:
    await box.activities.run_done_check(box.input("exit 1"))
    assert box.file(DONE_CHECK_FILE).exists()
    checked = await box.activities.run_done_check(box.input("echo ok"))
    assert (checked.passed, checked.exit_code, checked.tail) == (True, 0, "ok")
    assert not box.file(DONE_CHECK_FILE).exists()


async def test_a_hanging_check_is_ended_at_its_limit_and_counts_as_failed(box: Box) -> None:
    began = time.monotonic()
    checked = await box.activities.run_done_check(
        box.input("echo waiting for ever; sleep 600", timeout=2)
    )
    took = time.monotonic() - began

    # Ended by its own limit (2 s), not left to the provider's backstop on the whole command
    # (BACKSTOP_SECONDS past the limit: 37 s) or to its 600 s sleep.
    assert 2 <= took < 2 + BACKSTOP_SECONDS / 2, took
    assert (checked.passed, checked.timed_out) == (False, True)
    assert checked.tail == "waiting for ever"
    assert "result: timed out after 2 s and was ended" in box.file(DONE_CHECK_FILE).read_text()


async def test_a_check_ignoring_its_end_is_killed_after_the_grace(box: Box) -> None:
    began = time.monotonic()
    checked = await box.activities.run_done_check(
        box.input("trap '' TERM; sleep 600 & wait", timeout=1)
    )
    took = time.monotonic() - began
    # Killed after the grace (6 s here), not left to the provider's backstop (36 s).
    assert 1 + KILL_AFTER_SECONDS <= took < 1 + BACKSTOP_SECONDS / 2, took
    assert checked.timed_out and not checked.passed


async def test_what_a_check_left_running_is_ended_with_it(box: Box) -> None:
    began = time.monotonic()
    checked = await box.activities.run_done_check(
        box.input("sleep 300 & echo started a server; exit 0", timeout=60)
    )
    # Back when the check exited, not when its 60 s limit came for what it left running.
    assert time.monotonic() - began < 30
    assert (checked.passed, checked.tail) == (True, "started a server")
    left = await box.provider.run(box.sandbox_id, "pgrep -x sleep || true")
    assert left.stdout.strip() == ""


async def test_megabytes_of_binary_output_stay_bounded(box: Box) -> None:
    began = time.monotonic()
    checked = await box.activities.run_done_check(
        box.input("head -c 50000000 /dev/urandom; printf '\\nlast line\\n'; exit 1")
    )
    assert time.monotonic() - began < 20
    assert not checked.passed and checked.truncated
    assert checked.tail.endswith("last line")
    assert len(checked.tail.encode()) <= FAILED_TAIL_BYTES
    assert box.file(DONE_CHECK_FILE).stat().st_size < 20_000
