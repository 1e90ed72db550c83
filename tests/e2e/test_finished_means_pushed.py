"""A run finishes only once its branch on the origin holds its work (issue 50), end to end: the
real dev server, the session's worker in this process, a real bubblewrap sandbox running the
sample agent, a real bare origin reached through the worker's gateway.

The origin refuses every push (read-only: the issue's own case, in real life an expired token
or a protected branch): the agent's own pushes fail and it finishes all the same; the run
then needs a person, naming the origin's refusal, its sandbox paused with every file and
commit in it. Made writable, `extend` pushes the same work and the run finishes, its branch on
the origin at the commit it names. On the code before, the run finished with the work only
in the sandbox, then stopped it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from temporalio.client import Client

from activities.github import API_URL_ENV, TOKEN_ENV
from activities.providers.local.engine import LocalEngine
from fakes.git_http import git_url
from fakes.github_api import FakeGitHub
from overnight.cli import client as api
from overnight.core.local_services import serve_to_agents
from overnight.core.models import BudgetExtension, RunSpec
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status

MIGRATION = "migrations/0001_add_due_date.sql"
GITHUB_TOKEN = "ghp_e2eFakeToken0123456789"
# Who holds the origin under a root worker: not root, so its read-only folders hold.
OWNER = 65534


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=cwd, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def on_origin(origin: Path, branch: str) -> str | None:
    found = subprocess.run(
        ["git", "-c", "safe.directory=*", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
        cwd=origin,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() or None


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A folder any user may enter (pytest's is its user's alone): the origin's owner, who
    serves it to the sandbox through the gateway, must reach it."""
    root = Path(tempfile.mkdtemp(prefix="overnight-pushed-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        takes_pushes(root, True)
        shutil.rmtree(root, ignore_errors=True)


def takes_pushes(folder: Path, allowed: bool) -> None:
    """The origin's folders writable (or read-only: no push can add an object or a ref),
    held by a user of its own under a root worker (root writes anywhere)."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        if os.geteuid() == 0:
            os.chown(path, OWNER, OWNER)
        if path.is_dir():
            path.chmod(0o777 if allowed else 0o555)


@pytest.mark.timeout(300)
async def test_an_origin_that_refuses_pushes_holds_the_run_until_it_takes_them(
    dev_client: Client, task_queue: str, runs: list[str], shared_root: Path
) -> None:
    run_id = new_run_id("refused-push")
    # No writable bind: the sandbox reaches the origin through the worker's gateway alone.
    spec, files = agent_spec(run_id, shared_root, binds=[])
    takes_pushes(files.origin, False)
    runs.append(run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)

    waiting = await wait_for_status(
        dev_client,
        run_id,
        lambda s: s.state in ("needs_attention", "finished", "failed"),
        timeout=180,
    )
    assert waiting.state == "needs_attention", (
        f"finished with its work only in its sandbox: {waiting}"
    )
    reason = waiting.attention_reason or ""
    assert reason.startswith("the origin refused the push: "), reason
    assert "unable to create temporary object directory" in reason and "[remote rejected]" in reason
    assert waiting.pushed_commit is None
    # Paused, not stopped: every file and commit of the agent's is there.
    assert waiting.sandbox_id is not None
    engine = LocalEngine()
    assert engine.get(waiting.sandbox_id).state == "paused"
    app = engine.host_path(waiting.sandbox_id, "/workspace/app")
    assert (app / MIGRATION).read_text().startswith("ALTER TABLE tasks")
    head = git(app, "rev-parse", "HEAD")
    assert git(app, "rev-list", "--count", "main..HEAD") == "5"
    assert on_origin(files.origin, spec.branch) is None

    takes_pushes(files.origin, True)
    await api.extend_budget(dev_client, run_id, BudgetExtension(hours=1))
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=120)

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    # The agent committed everything: its HEAD is what the branch holds, and the run names it.
    assert result.pushed_commit == head == on_origin(files.origin, spec.branch)
    assert git(files.origin, "show", f"{head}:{MIGRATION}").startswith("ALTER TABLE tasks")
    status = await api.get_status(dev_client, run_id)
    assert (status.state, status.pushed_commit) == ("finished", head)


@pytest.mark.timeout(300)
async def test_a_run_with_a_pull_request_finishes_with_one_whose_head_is_its_branch(
    dev_client: Client,
    task_queue: str,
    runs: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = new_run_id("pull-request")
    # The origin over smart HTTP, as GitHub serves one: /<owner>/<name> (the owner is the
    # fake git server's token for it); the sandbox reaches it through the worker's gateway.
    origin_path = tmp_path / run_id / "origin.git"
    repo = git_url(origin_path)
    port = urlsplit(repo).port
    assert port is not None
    serve_to_agents(port)
    owner = urlsplit(repo).path.strip("/").split("/")[0]
    spec, files = agent_spec(run_id, tmp_path, binds=[])
    spec = RunSpec.model_validate(
        {
            **spec.model_dump(),
            "repo": repo,
            "host_ports": [*spec.host_ports, port],
            "pull_request": {"labels": ["overnight"]},
        }
    )
    assert files.origin == origin_path
    with FakeGitHub(token=GITHUB_TOKEN) as github:
        github.add_repo(f"{owner}/origin", origin=files.origin)
        monkeypatch.setenv(TOKEN_ENV, GITHUB_TOKEN)
        monkeypatch.setenv(API_URL_ENV, github.api_url)
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=task_queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=180)
        pulls = github.pulls(f"{owner}/origin")
        created = github.count("create_pull")

    assert (result.outcome, result.restarts) == ("finished", 0)
    [pull] = pulls
    assert created == 1
    assert result.pull_request_url == pull["html_url"] == f"{github.url}/{owner}/origin/pull/1"
    assert (pull["head"]["ref"], pull["base"]["ref"], pull["draft"]) == (spec.branch, "main", True)
    # Its head is the commit the run pushed and names, which the origin's branch holds.
    assert pull["head"]["sha"] == result.pushed_commit == on_origin(files.origin, spec.branch)
    assert [label["name"] for label in pull["labels"]] == ["overnight"]
    assert pull["title"] == f"overnight run {run_id}"
    assert f"Opened by overnight for the run [{run_id}](" in pull["body"]
    status = await api.get_status(dev_client, run_id)
    assert status.pull_request_url == result.pull_request_url
