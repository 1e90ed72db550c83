"""A finished run's delivery on the time-skipping server (issue 50): a run finishes only once
its branch on the origin holds its work (`confirm_pushed`), and with `pull_request` once its
one pull request is open (`open_pull_request`). An origin that refuses the push past its
retries makes the run need a person, naming the refusal, its sandbox paused where it stands
(never stopped: the work is only there); an extension pushes again and finishes. The commit
the run names as its output is only ever one the origin holds.
"""

from __future__ import annotations

import json
from datetime import timedelta

from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld, exits, progress
from fakes.delivery import PULLS_URL
from overnight.core.models import BudgetExtension, RunSpec
from tests.workflows.harness import (
    eventually,
    keep_history,
    make_spec,
    started_run,
    status_of,
    until_state,
)

# What a protected branch answers (GitHub's words), with a token git might echo.
REFUSAL = "remote: error: GH006: Protected branch update failed for refs/heads/agent/x."
GITHUB_REPO = "https://github.com/octo/app.git"


def pr_spec(**pull_request: object) -> RunSpec:
    """A run of a GitHub repository that opens a pull request."""
    spec = make_spec(keep_failed_days=3)
    return RunSpec.model_validate(
        {**spec.model_dump(), "repo": GITHUB_REPO, "pull_request": pull_request}
    )


def finishing(commit: str = "a" * 40) -> str:
    """The checkpoint of an agent that called `finish()` naming its own HEAD as its commit."""
    outputs = {"summary": "added the due date", "outputs": {"commit": commit, "branch": "b"}}
    return json.dumps({"step": 3, "next": "done", "overnight": {"finish": outputs}})


async def test_a_finished_run_has_its_branch_pushed_and_names_only_that_commit(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress("cp-1"), progress(finishing()), exits(0)])
    spec = make_spec()
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "finished_pushed")

    pushed = world.delivery.origin[spec.branch]
    assert [p.sandbox_id for p in world.delivery.pushes] == ["box-1"]
    assert (result.outcome, result.pushed_commit, status.pushed_commit) == (
        "finished",
        pushed,
        pushed,
    )
    # The agent named "a" * 40; the run names the commit its branch holds.
    assert result.outputs is not None and result.outputs.values["commit"] == pushed
    assert status.outputs is not None and status.outputs.values["commit"] == pushed
    assert world.stopped == ["box-1"]  # stopped only after the push
    finished = next(n for n in world.notifications if n.event == "finished")
    assert finished.pushed_commit == pushed and "a" * 40 not in finished.reason


async def test_a_refused_push_needs_a_person_with_the_sandbox_paused_and_extend_finishes(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.delivery.refusing = REFUSAL
    world.script(1, [progress(finishing()), exits(0)])
    spec = make_spec()
    async with started_run(client, world, spec) as handle:
        await _past_the_retries(time_skipping_env)
        waiting = await until_state(handle, "needs_attention")
        await eventually(lambda: _last(world.log), lambda entry: entry == "pause box-1")
        tries = len(world.delivery.pushes)
        world.delivery.refusing = None  # a person made the origin take it
        await handle.signal("extend_budget", BudgetExtension(hours=1))
        result = await handle.result()
        await keep_history(handle, "push_refused_extended")

    assert waiting.attention_reason == f"the origin refused the push: {REFUSAL}"
    # Tried three times (retried by the policy), never stopped while the work was only there.
    assert tries == 3
    assert world.delivery.origin == {spec.branch: result.pushed_commit}
    # While it waited, no commit was named: the agent's was on no origin.
    assert waiting.pushed_commit is None
    assert waiting.outputs is not None and "commit" not in waiting.outputs.values
    assert world.paused == ["box-1"] and world.wakes == ["box-1"]
    assert world.log.index("pause box-1") < world.log.index("stop box-1")
    # Every try made the same commit (the same date): the one the origin now holds.
    assert len({p.at for p in world.delivery.pushes}) == 1
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.outputs is not None and result.outputs.values["commit"] == result.pushed_commit
    assert world.notified()[:1] == ["needs_attention"] and "finished" in world.notified()
    told = next(n for n in world.notifications if n.event == "needs_attention")
    assert told.reason == f"the origin refused the push: {REFUSAL}"


async def test_a_run_cancelled_while_its_work_is_only_in_its_sandbox_keeps_it_paused(
    client: Client, world: FakeWorld, time_skipping_env: WorkflowEnvironment
) -> None:
    world.delivery.refusing = REFUSAL
    world.script(1, [exits(0)])
    async with started_run(client, world, make_spec(keep_failed_days=3)) as handle:
        await _past_the_retries(time_skipping_env)
        await until_state(handle, "needs_attention")
        await handle.signal("cancel", "not worth it")
        result = await handle.result()

    assert (result.outcome, result.pushed_commit) == ("cancelled", None)
    assert world.state_of(1) == "paused" and world.stopped == []
    assert "box-1" in world.kept_until  # kept for a look, labelled, as a failed attempt's


async def test_a_sandbox_gone_before_its_push_is_a_restart_from_the_checkpoint(
    client: Client, world: FakeWorld
) -> None:
    gone = ApplicationError("sandbox box-1 is stopped", type="SandboxGone", non_retryable=True)
    world.delivery.push_errors = [gone]
    world.script(1, [progress("cp-1"), exits(0)])
    world.script(2, [exits(0)])
    async with started_run(client, world, make_spec()) as handle:
        result = await handle.result()

    assert [p.sandbox_id for p in world.delivery.pushes] == ["box-1", "box-2"]
    assert world.creates()[1].restart_reason == "sandbox box-1 is stopped"
    assert world.creates()[1].checkpoint == "cp-1"
    assert (result.outcome, result.restarts) == ("finished", 1)
    assert result.pushed_commit is not None


async def test_a_run_with_pull_request_opens_one_and_names_it_everywhere(
    client: Client, world: FakeWorld
) -> None:
    world.script(1, [progress(finishing()), exits(0)])
    spec = pr_spec(base="main", labels=["overnight"])
    async with started_run(client, world, spec) as handle:
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "pull_request_opened")

    url = f"{PULLS_URL}/1"
    assert (result.pull_request_url, status.pull_request_url) == (url, url)
    [call] = world.delivery.pull_calls
    # Opened on the commit the branch holds, with the run's facts for its body.
    assert call.commit == result.pushed_commit == world.delivery.origin[spec.branch]
    assert (call.facts.run_id, call.facts.summary, call.facts.attempts) == (
        spec.run_id,
        "added the due date",
        1,
    )
    finished = next(n for n in world.notifications if n.event == "finished")
    assert finished.pull_request_url == url and f"pull request: {url}" in finished.reason


async def test_a_pull_request_github_refuses_needs_a_person_and_extend_opens_it(
    client: Client, world: FakeWorld
) -> None:
    world.delivery.pull_errors = [
        ApplicationError(
            "the pull request could not be opened: POST /repos/octo/app/pulls: HTTP 403: "
            "Resource not accessible by personal access token",
            type="PullRequestRefused",
            non_retryable=True,
        )
    ]
    world.script(1, [exits(0)])
    spec = pr_spec()
    async with started_run(client, world, spec) as handle:
        waiting = await until_state(handle, "needs_attention")
        await eventually(lambda: _last(world.log), lambda entry: entry == "pause box-1")
        await handle.signal("extend_budget", BudgetExtension(hours=1))
        result = await handle.result()

    assert waiting.attention_reason is not None
    assert waiting.attention_reason.startswith("the pull request could not be opened: POST")
    assert "403" in waiting.attention_reason
    # Pushed once: the extension only opened the pull request.
    assert len(world.delivery.pushes) == 1 and len(world.delivery.pull_calls) == 2
    assert (result.outcome, result.pull_request_url) == ("finished", f"{PULLS_URL}/1")
    assert len(world.delivery.pulls) == 1


async def test_github_out_of_reach_is_retried_after_the_wait_it_named_and_opens_one(
    client: Client, world: FakeWorld
) -> None:
    world.delivery.pull_errors = [
        ApplicationError(
            "the pull request could not be opened: secondary rate limit",
            type="GitHubUnavailable",
            next_retry_delay=timedelta(minutes=3),
        )
    ]
    world.script(1, [exits(0)])
    spec = pr_spec()
    async with started_run(client, world, spec) as handle:
        result = await handle.result()

    assert len(world.delivery.pull_calls) == 2 and len(world.delivery.pulls) == 1
    assert (result.outcome, result.pull_request_url) == ("finished", f"{PULLS_URL}/1")


async def _past_the_retries(env: WorkflowEnvironment) -> None:
    """The push's retries wait seconds of workflow time: skipped (the clock stands still
    while a test polls)."""
    await env.sleep(timedelta(minutes=2))


async def _last(log: list[str]) -> str:
    return log[-1] if log else ""
