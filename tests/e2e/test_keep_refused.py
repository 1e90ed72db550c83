"""A kept workspace the origin refuses holds the run (issue 50, test 2), end to end: the real
dev server, the session's worker in this process, a real bubblewrap sandbox running the sample
agent with `keep_workspace`, a real bare origin reached through the worker's gateway.

The origin refuses every push (read-only). The first keep fails, and the run says so at once:
it needs a person, naming the keep and git's words, its sandbox paused with the agent's work
in it, rather than going on with work a crash would lose. Made writable, `overnight push`
(the `push_again` update) wakes the same agent, keeps the workspace again (pushed, on the
origin) and the run goes on to finish with no restart. On the code before, the run went on
past the failed keep with its work only in the sandbox.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.providers.local.engine import LocalEngine
from overnight.cli import client as api
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status
from tests.e2e.test_finished_means_pushed import (  # noqa: F401 (a fixture)
    on_origin,
    shared_root,
    takes_pushes,
)


def ref_on_origin(origin: Path, ref: str) -> str | None:
    found = subprocess.run(
        ["git", "-c", "safe.directory=*", "rev-parse", "--verify", "-q", ref],
        cwd=origin,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() or None


@pytest.mark.timeout(300)
async def test_a_keep_the_origin_refuses_holds_the_run_until_overnight_push(
    dev_client: Client,
    task_queue: str,
    runs: list[str],
    shared_root: Path,  # noqa: F811
) -> None:
    run_id = new_run_id("keep-refused")
    # Steps 4 s apart: the first keep is made while the agent goes on, so it holds the same
    # agent. Without a delay a first look could see checkpoint 1 with the agent already ended:
    # a finish is decided before a held keep (pure/decide.py), so the final push's refusal
    # held the run instead, its work safe as well (seen once in a CI-form run).
    spec, files = agent_spec(
        run_id, shared_root, binds=[], keep_workspace=True, agent_env={"AGENT_STEP_DELAY": "4"}
    )
    takes_pushes(files.origin, False)
    runs.append(run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)

    held = await wait_for_status(
        dev_client,
        run_id,
        lambda s: s.state in ("needs_attention", "finished", "failed"),
        timeout=180,
    )
    assert held.state == "needs_attention", f"went on past a failed keep: {held}"
    reason = held.attention_reason or ""
    assert reason.startswith("the workspace kept at checkpoint 1 could not be pushed"), reason
    assert "unable to create temporary object directory" in reason or "rejected" in reason
    assert held.workspace is not None
    assert [(k.number, k.outcome) for k in held.workspace.kept] == [(1, "failed")]
    assert held.sandbox_id is not None and held.restarts_used == 0
    assert LocalEngine().get(held.sandbox_id).state == "paused"

    takes_pushes(files.origin, True)
    said = await api.push_again(dev_client, run_id)
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=180)
    status = await api.get_status(dev_client, run_id)

    assert said == "trying again now"
    # The same agent went on: no restart, one sandbox; the keep that was refused is pushed.
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert status.workspace is not None
    kept = [k for k in status.workspace.kept if k.outcome == "pushed"]
    assert kept and kept[0].number == 2
    assert kept[0].ref is not None and ref_on_origin(files.origin, kept[0].ref) == kept[0].commit
    assert result.pushed_commit == on_origin(files.origin, spec.branch)
