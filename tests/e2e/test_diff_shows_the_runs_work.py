"""`overnight diff` shows the run's work (issue 51), end to end: the real dev server, a worker
in this process, a real bubblewrap sandbox, the real `overnight diff` as a subprocess.

The agent commits (and pushes) what it wrote before each checkpoint, as a careful agent
does, and leaves one file uncommitted; its origin is a bare one with history, or a newcomer's
fresh `git init` with no commit (another user's, when run as root). `overnight diff RUN`
shows all of it, from the commit the run started from; `--step 2` shows step 2's work alone,
from checkpoint 1's workspace. On the code before, `--step 2` was taken from where the run
started (steps 1 and 2 shown), and with no base recorded (the fresh origin had no commit to
start from) every diff was taken from the kept commit's own parent, the agent's last commit:
the committed work vanished.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.models import RunSpec
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from tests.e2e.newcomer_home import give_to_the_user, private_home
from tests.e2e.test_operator import overnight_cli
from tests.live import in_process_worker, new_run_id, nothing_left_running

# Two steps; each writes and commits its file and pushes the branch, then checkpoints and
# holds until the run has kept that checkpoint's workspace (a ref more on the origin). Step 1
# also leaves draft.txt uncommitted.
AGENT = """\
import json, os, pathlib, subprocess, time
def git(*args):
    subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=a@example.com", *args],
                   check=True)
def kept():
    run = os.environ["OVERNIGHT_RUN_ID"]
    listed = subprocess.run(["git", "ls-remote", "origin", f"refs/overnight/{run}/*"],
                            capture_output=True, text=True)
    return len(listed.stdout.splitlines())
cp = pathlib.Path(os.environ["OVERNIGHT_CHECKPOINT"])
state = json.loads(cp.read_text()) if cp.exists() else {"step": 0}
while state["step"] < 2:
    k = state["step"] + 1
    pathlib.Path(f"feature-{k}.txt").write_text(f"the work of step {k}\\n")
    git("add", f"feature-{k}.txt")
    git("commit", "-qm", f"step {k}")
    git("push", "-q", "origin", "HEAD")
    if k == 1:
        pathlib.Path("draft.txt").write_text("not committed yet\\n")
    state.update(step=k, next="done" if k == 2 else "step 2")
    before = kept()
    tmp = cp.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(cp)
    deadline = time.monotonic() + 60
    while kept() <= before and time.monotonic() < deadline:
        time.sleep(0.3)
"""


def fresh_repository(folder: Path) -> Path:
    """A newcomer's origin: `git init` and nothing else (no commit: the run's branch is the
    first); the user's, not root's, when run as root."""
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    give_to_the_user(folder)
    return folder


def committing_spec(root: Path, home: Path, run_id: str, origin: str) -> RunSpec:
    agent = root / "agent"
    agent.mkdir(parents=True)
    (agent / "main.py").write_text(AGENT)
    if origin == "fresh":
        repo = str(fresh_repository(home / "app"))
    else:
        repo = origin_fields(make_origin(root / run_id).origin, "local")["repo"]
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            "repo": repo,
            "agent_dir": str(agent),
            "command": "python3 /workspace/agent/main.py",
            "poll_seconds": 1,
            "stall_seconds": 120,
            "sandbox_timeout_seconds": 300,
            "keep_workspace": True,
        }
    )


def files_in(diff: str) -> list[str]:
    return sorted(line.removeprefix("+++ b/") for line in diff.splitlines() if line[:6] == "+++ b/")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("origin", ["with-history", "fresh"])
async def test_diff_shows_committed_and_uncommitted_work_from_where_the_run_started(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, origin: str
) -> None:
    with private_home(tmp_path) as home:
        await _run_and_diff(dev_server, dev_client, tmp_path, home, origin)


async def _run_and_diff(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, home: Path, origin: str
) -> None:
    run_id = new_run_id("diff-work")
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "diff-work") as queue,
    ):
        runs.append(run_id)
        spec = committing_spec(tmp_path, home, run_id, origin)
        await api.start_run(dev_client, spec, task_queue=queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=240)
        assert result.outcome == "finished", result
        status = await api.get_status(dev_client, run_id)
        assert status.workspace is not None, status
        # Recorded where the origin had a commit to start from.
        assert (status.workspace.base is not None) == (origin == "with-history"), status
        assert [k.outcome for k in status.workspace.kept] == ["pushed", "pushed"]
        whole = await overnight_cli(dev_server, "diff", run_id)
        step_1 = await overnight_cli(dev_server, "diff", run_id, "--step", "1")
        step_2 = await overnight_cli(dev_server, "diff", run_id, "--step", "2")
    for shown in (whole, step_1, step_2):
        assert shown.returncode == 0, shown.stderr
    assert files_in(whole.stdout) == ["draft.txt", "feature-1.txt", "feature-2.txt"], whole.stdout
    assert "+the work of step 1" in whole.stdout and "+the work of step 2" in whole.stdout
    assert files_in(step_1.stdout) == ["draft.txt", "feature-1.txt"], step_1.stdout
    # Step 2 alone: from checkpoint 1's workspace (draft.txt was already there).
    assert files_in(step_2.stdout) == ["feature-2.txt"], step_2.stdout
