"""AgentRun through every failure row of the design, on the time-skipping server.

Each test scripts what the agent and its sandbox do (fakes/activities.py), runs the real
workflow against mocked activities, and checks what overnight did and what was lost: at most
the work since the last checkpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from fakes.activities import (
    FakeWorld,
    HandedOver,
    Overloaded,
    Quiet,
    SandboxStops,
    StopsAnswering,
    WorkerDies,
    Writes,
    checkpoint_binary,
    checkpoint_ok,
    checkpoint_too_large,
    exits,
    note,
    progress,
)
from overnight.core.models import RunStatus
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_idle,
)
from workflows import policies


async def test_finished_agent_has_its_final_checkpoint_copied_and_its_sandbox_stopped(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress(note("step 2", "step 1 done")), exits(0, final=note("done"))])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "finished")

    assert result.outcome == "finished"
    assert result.checkpoint == note("done")  # written just before exit, copied by the end
    assert (result.attempts, result.restarts) == (1, 0)
    assert world.log == ["create box-1", "stop box-1"]
    assert world.running() == []
    assert status.state == "finished"
    assert status.process_id is None


async def test_crashed_agent_gets_a_new_sandbox_from_its_last_checkpoint(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(1)])
    world.script(2, [progress("cp-2"), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "crash")

    second = world.creates()[1]
    assert (second.attempt, second.checkpoint) == (2, "cp-1")
    assert second.restart_reason == "agent crashed (exit 1)"
    # The crashed sandbox is paused (kept for a look) before its successor is made.
    assert world.log[:3] == ["create box-1", "pause box-1", "create box-2"]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
    assert result.checkpoint == "cp-2"
    [record] = status.restarts
    assert (record.attempt, record.sandbox_id, record.reason) == (
        1,
        "box-1",
        "agent crashed (exit 1)",
    )


async def test_checkpoint_written_just_before_a_crash_is_carried_over(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(3, final="cp-1b")])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert world.creates()[1].checkpoint == "cp-1b"
    assert result.checkpoint == "cp-1b"


async def test_stalled_agent_is_restarted_at_the_threshold_from_its_last_checkpoint(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.script(1, [progress("cp-1")])  # then quiet for ever: stuck in a loop
    world.script(2, [progress("cp-2"), exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        progressed = await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        assert progressed.last_progress_at is not None
        await time_skipping_env.sleep(timedelta(minutes=14, seconds=50))
        before = await status_of(handle)
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "stall")

    assert before.restarts == [] and before.attempt == 1
    [record] = status.restarts
    assert record.reason == "agent stalled 15 min"
    stalled_for = (record.at - progressed.last_progress_at).total_seconds()
    assert 900 <= stalled_for < 901
    assert world.creates()[1].checkpoint == "cp-1"
    assert world.creates()[1].restart_reason == "agent stalled 15 min"
    assert world.log[:3] == ["create box-1", "pause box-1", "create box-2"]
    assert (result.restarts, result.checkpoint) == (1, "cp-2")


async def test_fresh_context_exit_starts_the_agent_again_in_the_same_sandbox_uncounted(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(75), progress("cp-2"), exits(0, final="cp-3")])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "fresh_context")

    assert world.log == ["create box-1", "start agent in box-1", "stop box-1"]
    again = world.starts[1]
    assert (again.sandbox_id, again.fresh_start) == ("box-1", 1)
    assert again.restart_reason == "context window full: fresh start"
    assert (result.attempts, result.restarts, result.checkpoint) == (1, 0, "cp-3")
    assert status.fresh_starts_used == 1
    assert status.restarts == []


async def test_fresh_context_beyond_its_cap_is_a_counted_restart(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), exits(75), exits(75)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(max_fresh_starts=1)) as handle:
        result = await handle.result()

    assert [start.fresh_start for start in world.starts] == [0, 1, 0]
    assert world.creates()[1].restart_reason == "fresh-context starts used up (1)"
    assert world.creates()[1].checkpoint == "cp-1"
    assert result.restarts == 1


async def test_sandbox_time_limit_gets_a_new_sandbox_from_the_checkpoint(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), SandboxStops("timeout")])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(sandbox_timeout_seconds=60)) as handle:
        result = await handle.result()
        await keep_history(handle, "time_limit")

    second = world.creates()[1]
    assert (second.restart_reason, second.checkpoint) == ("sandbox time limit reached", "cp-1")
    assert (result.restarts, result.attempts) == (1, 2)
    assert world.running() == []


async def test_sandbox_that_stops_answering_is_replaced_after_bounded_retries(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), StopsAnswering()])
    world.script(2, [exits(0, final="cp-2")])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "stopped_answering")

    failed_looks = [look for look in world.observed if look.sandbox_id == "box-1"][1:]
    assert len(failed_looks) == policies.OBSERVE_RETRY.maximum_attempts
    reason = status.restarts[0].reason
    assert reason.startswith("sandbox stopped answering (")
    assert "box-1 is not answering" in reason
    assert world.creates()[1].checkpoint == "cp-1"
    assert world.creates()[1].restart_reason == reason
    # Pausing the dead sandbox failed too; that did not stop the run.
    assert (result.outcome, result.restarts, result.checkpoint) == ("finished", 1, "cp-2")


async def test_watches_handed_over_by_workers_shutting_down_cost_no_restart(
    client: Client, world: FakeWorld
) -> None:
    # Every attempt of one observe meets a worker shutting down (a long rolling deploy): its
    # last attempt's WorkerShutdown is no sign of a dead sandbox; the run just looks again.
    attempts = policies.OBSERVE_RETRY.maximum_attempts
    world.script(1, [progress("cp-1"), *[HandedOver()] * attempts, exits(0, final="cp-2")])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert len([look for look in world.observed if look.sandbox_id == "box-1"]) == attempts + 2
    assert (result.outcome, result.restarts, result.attempts) == ("finished", 0, 1)
    assert result.checkpoint == "cp-2"


async def test_status_reports_restarts_checkpoint_summary_budget_and_hours(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    checkpoint = note("write the tests", "cloned the repo", "read the spec")
    world.script(1, [progress(note("clone")), exits(1)])
    world.script(2, [progress(checkpoint)])
    spec = make_spec(stall_seconds=3600)
    async with started_run(client, world, spec) as handle:
        status = await eventually(lambda: status_of(handle), lambda s: s.attempt == 2)
        status = await eventually(
            lambda: status_of(handle), lambda s: s.checkpoint_bytes == len(checkpoint)
        )
        await time_skipping_env.sleep(timedelta(minutes=31))
        later = await status_of(handle)
        await until_idle(world)
        await handle.signal("cancel", "enough")
        await handle.result()

    assert status.run_id == spec.run_id
    assert (status.state, status.attempt, status.sandbox_id) == ("running", 2, "box-2")
    assert status.process_id == "agent-2-0"
    assert (status.restarts_used, status.fresh_starts_used) == (1, 0)
    assert status.budget == spec.budget
    assert status.checkpoint_summary is not None
    assert status.checkpoint_summary.next == "write the tests"
    assert status.checkpoint_summary.last_note == "read the spec"
    [record] = status.restarts
    assert (record.attempt, record.sandbox_id, record.reason) == (
        1,
        "box-1",
        "agent crashed (exit 1)",
    )
    assert status.last_progress_at is not None and status.last_progress_at >= record.at
    assert status.checkpoint_rejected is None and status.attention_reason is None
    # Half an hour later (as of the workflow's last wake, every 10 min when the agent is
    # quiet: a query sees the clock of the last workflow task) hours and spend have grown:
    # 30 to 31 minutes, each figure rounded to 4 decimals (no bound sits on the truth: a
    # difference of rounded floats may fall a hair under 0.5).
    assert 0.499 < later.hours_used - status.hours_used < 0.52
    assert later.spend_usd > status.spend_usd
    assert later.last_progress_at == status.last_progress_at
    assert later.started_at == status.started_at


async def test_bad_checkpoints_never_replace_the_last_good_one(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    good = note("step 2", "step 1 done")
    world.script(
        1,
        [
            progress(good),
            Writes(checkpoint_too_large(300_000)),
            Quiet(),
            Writes(checkpoint_ok('{"next": "step 3", "no')),
            Quiet(),
            Writes(checkpoint_binary(b"\xff\xfe\x00")),
        ],
    )
    rejections: list[RunStatus] = []
    async with started_run(client, world, make_spec(stall_seconds=3600)) as handle:
        taken = await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        for expected in ("over the 262144 cap", "stopped parsing as JSON", "could not be read"):
            rejections.append(await eventually(lambda: status_of(handle), rejected_for(expected)))
            await time_skipping_env.sleep(timedelta(minutes=10))
        await until_idle(world)
        await handle.signal("cancel")
        result = await handle.result()

    for seen in rejections:
        assert seen.checkpoint_bytes == len(good)
        assert seen.checkpoint_summary is not None and seen.checkpoint_summary.next == "step 2"
        # A refused file is no progress: the stall clock still runs from the good one.
        assert seen.last_progress_at == taken.last_progress_at
    assert [seen.checkpoint_rejected for seen in rejections] == [
        "checkpoint is 300000 bytes, over the 262144 cap",
        "checkpoint stopped parsing as JSON (truncated or corrupt)",
        "checkpoint could not be read: (invalid start byte)",
    ]
    assert (result.outcome, result.checkpoint) == ("cancelled", good)


def rejected_for(words: str) -> Callable[[RunStatus], bool]:
    return lambda status: words in (status.checkpoint_rejected or "")


async def test_a_stall_is_noticed_on_time_when_the_worker_watching_it_dies(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    # The look that ends at the stall deadline is on a worker SIGKILLed at once: Temporal must
    # time it out soon after the deadline (not after its heartbeat timeout or the usual grace),
    # so another worker looks and the stall costs no more than the threshold. A short one: time
    # does not skip while the dead look is in flight.
    world.script(1, [progress("cp-1"), WorkerDies()])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(stall_seconds=8)) as handle:
        progressed = await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        assert progressed.last_progress_at is not None
        result = await handle.result()
        status = await status_of(handle)

    [record] = status.restarts
    assert record.reason == "agent stalled 8 s"
    late = (record.at - progressed.last_progress_at).total_seconds() - 8
    assert 0 <= late <= policies.DEADLINE_OBSERVE_GRACE.total_seconds() + 5
    assert result.restarts == 1


async def test_a_stop_whose_worker_dies_is_retried_after_its_heartbeat_timeout(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    # The finished run's stop lands on a worker SIGKILLed as it begins. The stop heartbeats
    # when it runs long, so Temporal retries it after ACTION_HEARTBEAT (20 s of real time:
    # time does not skip while the dead step is in flight), not after ACTION_TIMEOUT (2 min;
    # a reduced chaos run's last stop waited so).
    world.script(1, [progress("cp-1"), exits(0)])
    world.stop_workers_die = 1
    async with started_run(client, world, make_spec()) as handle:
        begun = time.monotonic()
        result = await asyncio.wait_for(handle.result(), timeout=90)
        took = time.monotonic() - begun

    assert result.outcome == "finished"
    assert world.stop_attempts[:2] == [1, 2] and world.state_of(1) == "stopped"
    # Well before ACTION_TIMEOUT's retry; 60 s past the heartbeat's for a loaded machine's rest.
    heartbeat = policies.ACTION_HEARTBEAT.total_seconds()
    assert took < heartbeat + 60 < policies.ACTION_TIMEOUT.total_seconds()


@pytest.mark.long
async def test_each_look_at_the_stall_deadline_lost_with_its_worker_costs_the_grace_alone(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    # The look that ends at the stall deadline dies with its worker, and so does the look
    # after it. Each costs `DEADLINE_OBSERVE_GRACE`: the second is not held for a retry's own
    # timeout (the first look's wait again, or the heartbeat timeout), which made a stall in
    # the full chaos run 47 s late.
    world.script(1, [progress("cp-1"), WorkerDies(), WorkerDies()])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(stall_seconds=8)) as handle:
        progressed = await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        assert progressed.last_progress_at is not None
        result = await handle.result()
        status = await status_of(handle)

    [record] = status.restarts
    assert record.reason == "agent stalled 8 s"
    late = (record.at - progressed.last_progress_at).total_seconds() - 8
    assert 0 <= late <= 2 * policies.DEADLINE_OBSERVE_GRACE.total_seconds() + 5
    assert result.restarts == 1


async def test_a_look_at_the_stall_deadline_that_a_storm_outlasts_is_looked_again(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    # The provider's API is overloaded for the whole of the look that ends at the stall
    # deadline (its tries fail until no time is left for another): the run looks again,
    # rather than take the sandbox as no longer answering (a chaos run restarted a healthy
    # agent so, and its step was done twice).
    storm = [Overloaded()] * 8  # tries 1 s, 2 s, ... 60 s apart: the 8th at 123 s, none after
    world.script(1, [progress("cp-1"), *storm, progress("cp-2"), exits(0)])
    async with started_run(client, world, make_spec(stall_seconds=120)) as handle:
        result = await handle.result()

    assert (result.outcome, result.restarts, result.attempts) == ("finished", 0, 1)
    assert result.checkpoint == "cp-2"


async def test_an_agent_that_progressed_while_its_look_died_is_not_restarted_as_stalled(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    # The look ending at the stall deadline dies with its worker, and the agent checkpoints
    # meanwhile; the look's retry, begun past the deadline, misses the write. A last read of
    # the checkpoint before the stall restart finds it: the same agent goes on.
    died = WorkerDies(meanwhile=checkpoint_ok("cp-2"))
    world.script(1, [progress("cp-1"), died, Quiet(), exits(0)])  # Quiet: the late retry
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec(stall_seconds=8)) as handle:
        result = await handle.result()
        status = await status_of(handle)

    assert (result.outcome, result.restarts, result.attempts) == ("finished", 0, 1)
    assert status.restarts == [] and result.checkpoint == "cp-2"
