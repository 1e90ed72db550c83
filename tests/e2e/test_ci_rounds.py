"""CI rounds end to end (issue 50, test 4): the dev server, a worker in this process, a local
bubblewrap sandbox running the real pinned Claude Code CLI through overnight's adapter against
the scripted fake model API, a real origin served over smart HTTP, and the fake GitHub with a
CI of its own (`FakeGitHub.run_ci`: a check run on each pushed commit, in progress at its
first look, then done).

The CI's check `tests` passes only on a commit holding `fixed.txt`. The CLI's first session
ends without it: the run pushes, opens its pull request and waits on CI with its sandbox
paused; the check fails, and the adapter, started again in the same sandbox, resumes the same
session with the check's name and its log's tail as the next prompt. The model writes the file,
the run pushes again, the check passes: one extra round, finished. A check that never passes
makes the run need a person after `max_ci_rounds`, its sandbox paused.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from temporalio.client import Client

from activities.github import API_URL_ENV, TOKEN_ENV
from activities.providers.local.engine import LocalEngine
from fakes.git_http import git_url
from fakes.github_api import FakeGitHub
from fakes.github_api.world import CheckRun
from fakes.model_api import FakeModelApi, Shell, text, tools
from fakes.model_api.turns import Answer
from overnight.cli import client as api
from overnight.core.local_services import serve_to_agents
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.e2e.coding_agent_runs import (
    agents_queue,  # noqa: F401 (a fixture)
    claude_code,  # noqa: F401 (a fixture)
    coding_spec,
    credential,  # noqa: F401 (a fixture)
    fake_wait,
    new_origin,
    run_result,
)
from tests.e2e.helpers import wait_for_status
from tests.live import running_sandboxes
from tests.waits import CAP

GITHUB_TOKEN = "ghp_e2eCiRoundsToken0123456"
FIXED = "fixed by the agent"
# The agent's work before CI (a pull request needs a commit its base lacks).
FEATURE = "echo 'due dates' > feature.txt"
LOG = "E   AssertionError: fixed.txt is missing\n1 failed, 3 passed in 0.12s"


def ci_judge(origin: Path, sha: str) -> list[CheckRun]:
    """The repository's CI: `tests` passes on a commit that holds fixed.txt."""
    held = subprocess.run(
        ["git", "-c", "safe.directory=*", "cat-file", "-e", f"{sha}:fixed.txt"],
        cwd=origin,
        capture_output=True,
    )
    if held.returncode == 0:
        return [CheckRun(name="tests", conclusion="success", title="4 passed")]
    return [CheckRun(name="tests", conclusion="failure", title="1 failed", text=LOG)]


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """The fake GitHub, its address and token in the worker's environment."""
    with FakeGitHub(token=GITHUB_TOKEN) as fake:
        monkeypatch.setenv(TOKEN_ENV, GITHUB_TOKEN)
        monkeypatch.setenv(API_URL_ENV, fake.api_url)
        yield fake


async def start_ci_run(
    dev_client: Client,
    queue: str,
    runs: list[str],
    root: Path,
    fake: FakeModelApi,
    github: FakeGitHub,
    prefix: str,
    max_ci_rounds: int,
) -> tuple[str, Path]:
    """A Claude Code run on an origin over smart HTTP, its pull request held to its CI."""
    run_id, files = new_origin(runs, root, prefix)
    repo = git_url(files.origin)
    port = urlsplit(repo).port
    assert port is not None
    serve_to_agents(port)
    owner = urlsplit(repo).path.strip("/").split("/")[0]
    github.add_repo(f"{owner}/origin", origin=files.origin)
    github.run_ci(f"{owner}/origin", lambda sha: ci_judge(files.origin, sha))
    spec = coding_spec(
        run_id,
        files,
        fake,
        prompt="Make the pull request's CI pass.",
        repo=repo,
        binds=[],
        host_ports=[fake.port, port],
        pull_request={"until_checks_pass": True},
        budget={"max_ci_rounds": max_ci_rounds},
    )
    await api.start_run(dev_client, spec, task_queue=queue)
    return run_id, files.origin


@pytest.mark.timeout(300)
async def test_a_check_that_fails_once_is_fixed_in_one_more_round_of_the_same_session(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
    github: FakeGitHub,
) -> None:
    script: list[Answer] = [
        tools(Shell(FEATURE), label="feature"),
        text("The feature is in: done.", label="first"),
        tools(Shell(f"echo '{FIXED}' > fixed.txt"), label="fix"),
        text("fixed.txt is there now.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        run_id, origin = await start_ci_run(
            dev_client, agents_queue, runs, tmp_path, fake, github, "ci-once", 3
        )
        result = await run_result(dev_client, run_id, timeout=180)
        status = await api.get_status(dev_client, run_id)
        requests = fake.requests()
        [pull] = github.pulls(
            f"{urlsplit(result.pull_request_url or '').path.split('/')[1]}/origin"
        )
        looks = github.count("check_runs")

    # The session's next request carries the failing check's name and its log's tail.
    assert [r.label for r in requests] == ["feature", "first", "fix", "final"]
    assert fake.script.unmatched == []
    told = requests[2].text()
    assert "the check `tests` failed" in told and LOG in told
    assert fake.session_ids() == [requests[0].session_id] and requests[0].session_id
    # One extra round, no restart, one sandbox; the pull request's head is the fix.
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert result.ci is not None
    assert (result.ci.state, result.ci.rounds_used, result.ci.passed) == ("passed", 1, ["tests"])
    # The check that failed is kept with its log's tail, and the pull request's body says it.
    assert result.ci.failing is not None and result.ci.failing.log_tail == LOG
    assert (
        "### CI rounds" in pull["body"] and "- round 1: tests (failure): 1 failed" in pull["body"]
    )
    assert pull["head"]["sha"] == result.pushed_commit
    fixed = subprocess.run(
        ["git", "-c", "safe.directory=*", "show", f"{result.pushed_commit}:fixed.txt"],
        cwd=origin,
        capture_output=True,
        text=True,
    )
    assert fixed.stdout.strip() == FIXED
    assert status.state == "finished" and status.ci is not None and status.ci.rounds_used == 1
    # Two commits watched, each looked at until done (the first look finds it in progress).
    assert looks >= 4
    assert running_sandboxes(run_id) == []


@pytest.mark.timeout(300)
async def test_a_check_that_never_passes_needs_a_person_after_max_ci_rounds(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
    github: FakeGitHub,
) -> None:
    script: list[Answer] = [
        tools(Shell(FEATURE), label="feature"),
        text("The feature is in: done.", label="first"),
        text("I cannot see what to fix.", label="second"),
    ]
    with FakeModelApi(script) as fake:
        run_id, _ = await start_ci_run(
            dev_client, agents_queue, runs, tmp_path, fake, github, "ci-never", 1
        )
        waiting = await wait_for_status(
            dev_client,
            run_id,
            lambda s: s.state in ("needs_attention", "finished", "failed"),
            timeout=240,
        )
        requests = await fake_wait(fake.wait_for_requests, 3, timeout=CAP)
        box_state = LocalEngine().get(waiting.sandbox_id or "").state
        await api.cancel_run(dev_client, run_id, "CI cannot pass")
        result = await run_result(dev_client, run_id, timeout=120)

    assert waiting.state == "needs_attention", waiting
    reason = waiting.attention_reason or ""
    assert reason.startswith("CI checks still failing after 1 round of 1 allowed: last, tests"), (
        reason
    )
    assert waiting.ci is not None and waiting.ci.rounds_used == 1
    assert waiting.ci.failing is not None and LOG in waiting.ci.failing.log_tail
    assert [r.label for r in requests] == ["feature", "first", "second"]
    assert box_state == "paused"
    assert result.outcome == "cancelled"
