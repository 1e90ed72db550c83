"""The done check on the time-skipping server: after the agent exits 0 the `done_when`
commands run against its pushed work in a sandbox of their own (`check-<n>`, stopped after
each round), `done_when_in_place` ones in its sandbox; a failure starts the agent again there
with a fresh process and the failure as its restart reason; failed rounds used up make the run
need a person, and an extension gives the agent the failure again."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import Hold, exits, progress
from overnight.core.models import Budget, BudgetExtension
from tests.waits import CAP
from tests.workflows.done_world import COMMIT, DoneWorld
from tests.workflows.harness import eventually, keep_history, make_spec, started_run, until_state


async def test_checks_run_against_the_pushed_work_in_a_new_sandbox_each_round(
    client: Client,
) -> None:
    world = DoneWorld().check_outcomes("pytest -q", 1)
    world.script(1, [progress("cp-1"), exits(0), exits(0, final="cp-2")])
    spec = make_spec(done_when=["pytest -q", "ruff check ."])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        await keep_history(handle, "done_check_fresh")

    # Each round: the work pushed from box-1 and a check sandbox made at it, the checks run
    # there, that sandbox stopped before anything else; the agent started again in box-1.
    assert [e for e in world.log if e.startswith(("create", "make", "start", "check", "stop"))] == [
        "create box-1",
        "make check-1 from box-1",
        "check 0 in check-1",
        "stop check-1",
        "start agent in box-1",
        "make check-2 from box-1",
        "check 0 in check-2",
        "check 1 in check-2",
        "stop check-2",
        "stop box-1",
    ]
    assert [(p.number, p.round, p.agent_sandbox_id) for p in world.prepares] == [
        (1, 1, "box-1"),
        (2, 2, "box-1"),
    ]
    # The second push counts only what the first did not send.
    assert (world.prepares[0].previous, world.prepares[1].previous) == (None, COMMIT)
    # The failure is written for the agent in its own sandbox, not the check's.
    assert [(c.sandbox_id, c.tell_sandbox_id, c.commit) for c in world.checks] == [
        ("check-1", "box-1", COMMIT),
        ("check-2", "box-1", COMMIT),
        ("check-2", "box-1", COMMIT),
    ]
    again = world.start_inputs[0]
    assert again.restart_reason == "done check failed: `pytest -q` (exit 1)"
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert [(c.command, c.passed, c.commit) for c in result.done_checks] == [
        ("pytest -q", True, COMMIT),
        ("ruff check .", True, COMMIT),
    ]
    assert world.running() == []


async def test_work_that_cannot_be_pushed_is_a_failed_round_told_to_the_agent(
    client: Client,
) -> None:
    world = DoneWorld()
    world.push_problems = ["the work was not checked: the origin has no such ref"]
    world.script(1, [exits(0), exits(0)])
    spec = make_spec(done_when=["pytest -q"])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    # No check sandbox for the round whose work is not on the origin; the next one has one.
    assert world.log.count("push from box-1 refused") == 1
    assert [box for box in world.sandboxes] == ["box-1", "check-2"]
    assert world.start_inputs[0].restart_reason == (
        "done check failed: `pytest -q` (the work was not checked: the origin has no such ref)"
    )
    assert (result.outcome, result.done_checks_used, result.restarts) == ("finished", 1, 0)


async def test_a_check_sandbox_that_cannot_be_made_is_swept_and_the_run_restarts(
    client: Client,
) -> None:
    world = DoneWorld()
    world.prepare_errors = [
        ApplicationError("clone failed", type="SpecUnusable", non_retryable=True)
    ]
    world.script(1, [progress("cp-1"), exits(0)])
    world.script(2, [exits(0, final="cp-2")])
    spec = make_spec(done_when=["pytest -q"])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    second = world.creates()[1]
    assert second.restart_reason.startswith("done check sandbox 1 could not be made ready: ")
    assert world.sandboxes["check-1"].state == "stopped"
    assert [c.sandbox_id for c in world.checks] == ["check-2"]
    assert (result.outcome, result.restarts) == ("finished", 1)
    assert world.running() == []


async def test_in_place_checks_run_in_the_agent_sandbox_first(client: Client) -> None:
    world = DoneWorld().check_outcomes("curl -f localhost:8000", 1)
    world.script(1, [exits(0), exits(0)])
    spec = make_spec(done_when=["pytest -q"], done_when_in_place=["curl -f localhost:8000"])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    # A failed in-place check ends the round before anything is pushed.
    assert [e for e in world.log if e.startswith(("make", "check"))] == [
        "check 0 in box-1",
        "check 0 in box-1",
        "make check-1 from box-1",
        "check 0 in check-1",
    ]
    assert [(c.command, c.in_place, c.tell_sandbox_id) for c in world.checks] == [
        ("curl -f localhost:8000", True, None),
        ("curl -f localhost:8000", True, None),
        ("pytest -q", False, "box-1"),
    ]
    assert world.start_inputs[0].restart_reason == (
        "done check failed: `curl -f localhost:8000` (exit 1)"
    )
    assert [(c.command, c.in_place) for c in result.done_checks] == [
        ("curl -f localhost:8000", True),
        ("pytest -q", False),
    ]


async def test_a_failed_check_starts_the_agent_again_in_its_sandbox_until_it_passes(
    client: Client,
) -> None:
    world = DoneWorld().check_outcomes("pytest -q", 1)
    world.script(1, [progress("cp-1"), exits(0), exits(0, final="cp-2")])
    spec = make_spec(done_when_in_place=["pytest -q", "ruff check ."])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        await keep_history(handle, "done_check_retried")

    # One sandbox: the agent was started again in it, not restarted from the checkpoint.
    assert [entry for entry in world.log if entry.startswith(("create", "start", "check"))] == [
        "create box-1",
        "check 0 in box-1",
        "start agent in box-1",
        "check 0 in box-1",
        "check 1 in box-1",
    ]
    again = world.start_inputs[0]
    assert again.restart_reason == "done check failed: `pytest -q` (exit 1)"
    assert (again.done_round, again.output_of) == (1, "agent-1-0")
    assert [(c.command, c.round, c.cwd) for c in world.checks] == [
        ("pytest -q", 1, "/workspace/app"),
        ("pytest -q", 2, "/workspace/app"),
        ("ruff check .", 2, "/workspace/app"),
    ]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.done_checks_used == 1
    assert [(c.command, c.passed, c.tail) for c in result.done_checks] == [
        ("pytest -q", True, "all good"),
        ("ruff check .", True, "all good"),
    ]
    assert result.checkpoint == "cp-2"
    assert world.stopped == ["box-1"]


async def test_used_up_checks_need_a_person_naming_the_check_and_an_extension_tries_again(
    client: Client,
) -> None:
    world = DoneWorld().check_outcomes("pytest -q", 1, 1, "timeout")
    world.script(1, [exits(0)] * 4)
    spec = make_spec(done_when=["pytest -q"], done_check_timeout_seconds=30)
    async with started_run(client, world, spec) as handle:
        waiting = await until_state(handle, "needs_attention")
        await eventually(lambda: _last(world.log), lambda entry: entry == "pause box-1")
        await handle.signal("extend_budget", BudgetExtension(done_checks=1))
        result = await handle.result()
        await keep_history(handle, "done_checks_used_up")

    assert waiting.attention_reason == (
        "done checks used up (3 failed rounds of 3 allowed): last, `pytest -q` "
        "(timed out after 30 s and was ended)"
    )
    assert waiting.done_checks_used == 3
    assert waiting.done_checks[-1].timed_out
    # Twice started again before the person, once after: all in the one sandbox, paused for
    # the person where it stood and woken by the extension.
    assert [start.done_round for start in world.start_inputs] == [1, 2, 3]
    assert world.start_inputs[2].restart_reason == (
        "done check failed: `pytest -q` (timed out after 30 s and was ended)"
    )
    assert world.paused == ["box-1"] and world.wakes == ["box-1"]
    # One check sandbox a round, each stopped: none waits with the person.
    assert [box.sandbox_id for box in world.sandboxes.values()] == [
        "box-1",
        "check-1",
        "check-2",
        "check-3",
        "check-4",
    ]
    assert world.stopped[:3] == ["check-1", "check-2", "check-3"]
    assert (result.outcome, result.done_checks_used, result.restarts) == ("finished", 3, 0)


async def test_a_lease_too_short_for_a_check_is_extended_before_it(client: Client) -> None:
    world = DoneWorld()
    world.lease = timedelta(minutes=5)
    world.script(1, [exits(0)])
    spec = make_spec(done_when_in_place=["pytest -q"], done_check_timeout_seconds=600)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    assert result.outcome == "finished"
    assert [sandbox for sandbox, _ in world.extends] == ["box-1"]
    assert world.log.index("check 0 in box-1") > 0


async def test_a_check_sandbox_lease_too_short_for_a_check_is_extended_before_it(
    client: Client,
) -> None:
    world = DoneWorld()
    world.lease = timedelta(minutes=5)
    world.script(1, [exits(0)])
    spec = make_spec(done_when=["pytest -q"], done_check_timeout_seconds=600)
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    assert result.outcome == "finished"
    assert "check-1" in [sandbox for sandbox, _ in world.extends]
    assert world.log.index("check 0 in check-1") > 0


async def test_a_check_that_cannot_be_run_restarts_from_the_checkpoint(client: Client) -> None:
    world = DoneWorld()
    world.check_errors = [ApplicationError("gone", type="SandboxNotFound", non_retryable=True)]
    world.script(1, [progress("cp-1"), exits(0)])
    world.script(2, [exits(0, final="cp-2")])
    spec = make_spec(done_when=["pytest -q"])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    second = world.creates()[1]
    assert second.restart_reason.startswith("done check 1 could not be run: ")
    assert (second.checkpoint, result.outcome, result.restarts) == ("cp-1", "finished", 1)
    assert [c.sandbox_id for c in world.checks] == ["check-1", "check-2"]
    assert [world.sandboxes[f"check-{n}"].state for n in (1, 2)] == ["stopped", "stopped"]
    assert result.done_checks_used == 0


async def test_a_run_without_done_when_runs_no_check(client: Client) -> None:
    world = DoneWorld()
    world.script(1, [exits(0)])
    async with started_run(client, world, make_spec(budget=Budget(max_done_checks=0))) as handle:
        result = await handle.result()
    assert result.outcome == "finished" and world.checks == [] and result.done_checks == []


async def test_a_cancel_during_a_long_check_ends_the_run_without_waiting_for_it(
    private_env: WorkflowEnvironment,
) -> None:
    world = DoneWorld()
    world.check_hold = hold = Hold()
    world.script(1, [exits(0)])
    spec = make_spec(done_when=["pytest -q"])
    async with started_run(private_env.client, world, spec) as handle:
        await asyncio.wait_for(hold.started.wait(), timeout=CAP)
        await handle.signal("cancel", "not needed after all")
        result = await handle.result()
        await eventually(lambda: _true(hold.cancelled), lambda cancelled: cancelled)

    assert result.outcome == "cancelled"
    # The check sandbox is stopped with the round it was made for, before the agent's.
    assert world.stopped == ["check-1", "box-1"] and world.start_inputs == []


async def _true(value: bool) -> bool:
    return value


async def _last(log: list[str]) -> str:
    return log[-1] if log else ""


async def test_a_cancel_while_the_check_sandbox_is_made_waits_for_it_and_stops_it(
    private_env: WorkflowEnvironment,
) -> None:
    world = DoneWorld()
    world.prepare_hold = hold = Hold()
    world.script(1, [exits(0)])
    spec = make_spec(done_when=["pytest -q"])
    async with started_run(private_env.client, world, spec) as handle:
        await asyncio.wait_for(hold.started.wait(), timeout=CAP)
        await handle.signal("cancel", "not needed after all")
        result = await handle.result()

    # The make was cancelled and waited for, so the sweep after it found its sandbox.
    assert result.outcome == "cancelled" and hold.cancelled
    assert world.checks == [] and world.running() == []
    assert "check-1" in world.stopped


async def test_a_temporal_cancellation_during_a_check_stops_the_check_sandbox(
    private_env: WorkflowEnvironment,
) -> None:
    world = DoneWorld()
    world.check_hold = hold = Hold()
    world.script(1, [exits(0)])
    spec = make_spec(done_when=["pytest -q"])
    async with started_run(private_env.client, world, spec) as handle:
        await asyncio.wait_for(hold.started.wait(), timeout=CAP)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()

    assert world.running() == []
    assert world.stopped[0] == "check-1" and "box-1" in world.stopped
