"""The run's pull request through a worker SIGKILLed between opening it and recording it, end
to end: a `python worker.py` process (the real dev server, a real bubblewrap sandbox running
the sample agent, a real origin over smart HTTP) opens the pull request on the fake GitHub and
dies (SIGKILL) before its next request, so the opening never reaches the run's history. The
next worker's try finds the pull request by its head branch (GitHub has no idempotency key:
the branch is the key, activities/github/pulls.py) and the run finishes with one.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from temporalio.client import Client

from activities.github import API_URL_ENV, TOKEN_ENV
from fakes.git_http import git_url
from fakes.github_api import FakeGitHub
from overnight.cli import client as api
from overnight.core.models import RunSpec
from overnight.worker.devserver import DevServer
from tests.chaos.stack import WorkerPool, worker_env
from tests.e2e.helpers import agent_spec, new_run_id
from tests.live import nothing_left_running

GITHUB_TOKEN = "ghp_e2eKilledWorkerToken0123"


@pytest.mark.timeout(300)
async def test_a_worker_killed_after_opening_the_pull_request_leaves_one(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("pr-killed")
    origin_path = tmp_path / run_id / "origin.git"
    repo = git_url(origin_path)
    port = urlsplit(repo).port
    assert port is not None
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
    home = tmp_path / "worker-home"
    with FakeGitHub(token=GITHUB_TOKEN) as github:
        github.add_repo(f"{owner}/origin", origin=files.origin)
        env = worker_env(
            dict(os.environ),
            {
                "TEMPORAL_ADDRESS": dev_server.address,
                "TEMPORAL_NAMESPACE": dev_server.namespace,
                "OVERNIGHT_HOME": str(home),
                TOKEN_ENV: GITHUB_TOKEN,
                API_URL_ENV: github.api_url,
            },
        )
        pool = WorkerPool(1, env, f"pr-killed-{run_id}", tmp_path)
        [worker] = pool.workers
        killed = asyncio.Event()
        loop = asyncio.get_running_loop()

        def kill_the_worker() -> None:
            # The pull request is open; the worker dies before its next request (the labels)
            # and before the activity's answer reaches the run's history.
            pool.kill(worker)
            loop.call_soon_threadsafe(killed.set)

        github.before("add_labels", kill_the_worker)
        pool.start_all()
        try:
            async with nothing_left_running(dev_client, [home]) as runs:
                await pool.wait_ready()
                runs.append(run_id)
                await api.start_run(dev_client, spec, task_queue=pool.task_queue)
                await asyncio.wait_for(killed.wait(), timeout=180)
                assert len(github.pulls(f"{owner}/origin")) == 1
                pool.start(worker)
                await pool.wait_ready()
                result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=180)
        finally:
            await asyncio.to_thread(pool.stop_all)
        pulls = github.pulls(f"{owner}/origin")
        created = github.count("create_pull")
        looked = github.count("list_pulls")

    assert pool.kills == 1
    assert result.outcome == "finished"
    # One pull request, opened once: the next try found it by its head and labelled it.
    [pull] = pulls
    assert (created, looked) == (1, 2)
    assert result.pull_request_url == pull["html_url"]
    assert pull["head"]["ref"] == spec.branch and pull["head"]["sha"] == result.pushed_commit
    assert [label["name"] for label in pull["labels"]] == ["overnight"]
