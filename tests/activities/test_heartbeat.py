"""Heartbeats only as the heartbeat timeout needs them, and a graceful worker shutdown handing
the step over at once (activities/heartbeat.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import timedelta

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.heartbeat import (
    HANDOVER_RETRY_DELAY,
    auto_heartbeat,
    hand_over_on_shutdown,
    heartbeat_interval,
)


def _env(heartbeat_timeout: float | None) -> ActivityEnvironment:
    env = ActivityEnvironment()
    timeout = None if heartbeat_timeout is None else timedelta(seconds=heartbeat_timeout)
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timeout)
    return env


async def test_no_heartbeat_at_the_start_then_one_per_four_fifths_of_the_timeout() -> None:
    env = _env(1.25)
    beats: list[float] = []
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())

    async def step() -> float | None:
        async with auto_heartbeat():
            while len(beats) < 3:
                await asyncio.sleep(0.01)
        return heartbeat_interval()

    began = time.monotonic()
    assert await asyncio.wait_for(env.run(step), 30) == pytest.approx(1.0)
    gaps = [b - a for a, b in zip([began, *beats], beats, strict=False)]
    assert len(beats) == 3  # none of them carries anything
    # None at the start and none sooner than 1 s after the last: the throttle's exact side.
    assert min(gaps) >= 0.95
    # None skipped (that is a gap of 2 s): a loaded machine delays each beat a little (seen:
    # 0.11 s with the suite on two processes), so the bound leaves it 0.7 s.
    assert max(gaps) < 1.7


async def test_a_step_with_no_heartbeat_timeout_never_heartbeats() -> None:
    env = _env(None)
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    async def step() -> None:
        async with auto_heartbeat():
            await asyncio.sleep(0.3)

    await env.run(step)
    assert beats == []


async def test_a_long_poll_hands_over_the_moment_the_worker_begins_to_shut_down() -> None:
    env = _env(30)
    ended: list[str] = []

    async def poll() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return "news"

    async def step() -> str:
        async with auto_heartbeat():
            return await hand_over_on_shutdown(poll(), "the watch")

    asyncio.get_running_loop().call_later(0.2, env.worker_shutdown)
    began = time.monotonic()
    with pytest.raises(ApplicationError) as raised:
        await env.run(step)
    # Handed over on the shutdown (0.2 s in), not when the 60 s poll ended.
    assert time.monotonic() - began < 20
    assert raised.value.type == "WorkerShutdown"
    assert not raised.value.non_retryable
    assert raised.value.next_retry_delay == HANDOVER_RETRY_DELAY
    assert ended == ["cancelled"]  # the long poll itself was ended, not left running


async def test_a_long_poll_that_ends_first_returns_its_result() -> None:
    env = _env(30)

    async def poll() -> str:
        await asyncio.sleep(0.05)
        return "news"

    async def step() -> str:
        return await hand_over_on_shutdown(poll(), "the watch")

    assert await env.run(step) == "news"


async def test_a_step_cancelled_at_the_end_of_the_shutdown_grace_is_handed_over() -> None:
    env = _env(30)

    async def step() -> None:
        async with auto_heartbeat():
            await asyncio.sleep(60)

    shutdown = activity.ActivityCancellationDetails(worker_shutdown=True)
    asyncio.get_running_loop().call_later(0.1, env.cancel, shutdown)
    with pytest.raises(ApplicationError) as raised:
        await env.run(step)
    assert raised.value.type == "WorkerShutdown"
    assert not raised.value.non_retryable


async def test_a_cancellation_by_the_workflow_stays_a_cancellation() -> None:
    env = _env(30)

    async def step() -> None:
        async with auto_heartbeat():
            await asyncio.sleep(60)

    asyncio.get_running_loop().call_later(0.1, env.cancel)
    with pytest.raises(asyncio.CancelledError):
        await env.run(step)
