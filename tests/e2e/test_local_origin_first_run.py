"""A newcomer's first run on a folder of their own (issue 51), the README's way: its minimal
spec as written there (`repo` "../app", `agent_dir`, `command`; no worker setting, no
writable bind, no chmod), a fresh `git init` repository owned by the user, the real
`overnight start` against the session's dev server and a worker with no grants, a real
bubblewrap sandbox whose git reaches the origin through the worker's gateway only. The run's
commits are on the origin at the end, and the origin is still wholly its owner's.

The repository is private (made under umask 077); where the machine lets it (the tests run
as root), it is another user's, in that user's private home, as a user's is to a root
worker. On the code before, its sandbox was refused until the folder was opened to every user
(`chmod o+rx`), though the gateway serves the clone and never needed the bind; and the
worker, asking the origin whether the push landed, was refused by git's ownership check (its
trust named the folder, where git judges a work tree's repository by its `.git`).

A `repo` that names no git repository is refused before anything runs: `start` exits 2 with
one line naming the field and the fix (before: the clone's 502 was retried, and `start` said
"still starting" and exited 0).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from overnight.cli import client as api
from overnight.cli.start_look import WAIT_ENV
from overnight.core.grants import parse_grants
from overnight.worker.devserver import DevServer
from tests.cli.test_cli import OVERNIGHT
from tests.cli.test_start_grants import GRANT_SETTINGS
from tests.e2e.newcomer_home import give_to_the_user, private_home
from tests.live import in_process_worker, nothing_left_running

README = Path(__file__).resolve().parents[2] / "README.md"
# The newcomer's agent: each step a commit; the first pushed by the agent itself, the second
# left for the run's finish to push.
AGENT = """\
import subprocess
from overnight_agent import Checkpoint

def git(*args):
    subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=agent@example.com", *args],
                   check=True)

cp = Checkpoint.load()
while cp.step < 2:
    cp.step += 1
    with open(f"step-{cp.step}.txt", "w") as f:
        f.write(f"step {cp.step}\\n")
    git("add", "-A")
    git("commit", "-qm", f"step {cp.step}")
    if cp.step == 1:
        git("push", "-q", "origin", "HEAD")
    cp.next = "done" if cp.step == 2 else "step 2"
    cp.note(f"step {cp.step} committed")
    cp.save()
"""


def readme_minimal_spec() -> dict[str, str]:
    """The README's 'complete minimal spec.json', as it stands there."""
    text = README.read_text()
    at = text.index("a complete minimal `spec.json`")
    block = re.search(r"```json\n(.*?)```", text[at:], re.S)
    assert block is not None, "the README shows no minimal spec"
    spec: dict[str, str] = json.loads(block.group(1))
    assert set(spec) == {"repo", "agent_dir", "command"}, spec
    return spec


@pytest.fixture
def user_home(tmp_path: Path) -> Iterator[Path]:
    with private_home(tmp_path) as home:
        yield home


def newcomer_folder(home: Path) -> Path:
    """The README's layout in `home`: the spec and its agent in one folder, the repo
    ("../app") beside it, a fresh `git init` with one commit, private (umask 077) and, when
    run as root, the home's user's. Returns the spec file."""
    spec = readme_minimal_spec()
    folder = home / "work"
    app = (folder / spec["repo"]).resolve()
    agent = folder / spec["agent_dir"]
    agent.mkdir(parents=True)
    (agent / "main.py").write_text(AGENT)
    (folder / "spec.json").write_text(json.dumps(spec, indent=2))
    umask = os.umask(0o077)
    try:
        app.mkdir()
        git = ["git", "-c", "user.name=me", "-c", "user.email=me@example.com", "-C", str(app)]
        subprocess.run([*git, "init", "-q"], check=True)
        (app / "README.md").write_text("my app\n")
        subprocess.run([*git, "add", "README.md"], check=True)
        subprocess.run([*git, "commit", "-qm", "first"], check=True)
    finally:
        os.umask(umask)
    give_to_the_user(app)
    return folder / "spec.json"


async def overnight_start(
    server: DevServer, spec: Path, queue: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in GRANT_SETTINGS}
    env[WAIT_ENV] = "120"  # a busy machine's slow first create must not end the look first
    return await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", server.address, "start", str(spec), "--task-queue", queue],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=spec.parent,
    )


def origin_log(app: Path, ref: str) -> list[str]:
    shown = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(app), "log", "--format=%s", ref],
        capture_output=True,
        text=True,
        check=True,
    )
    return shown.stdout.split("\n")[:-1]


async def test_the_readme_minimal_spec_runs_on_a_fresh_local_repo_and_its_commits_reach_it(
    dev_server: DevServer, dev_client: Client, user_home: Path
) -> None:
    spec_file = newcomer_folder(user_home)
    app = user_home / "app"
    owner = app.stat().st_uid
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "newcomer", grants=parse_grants({})) as queue,
    ):
        started = await overnight_start(dev_server, spec_file, queue)
        first = started.stdout.split("\n", 1)[0]
        assert first.startswith("started run-"), (started.stdout, started.stderr)
        run_id = first.removeprefix("started ")
        runs.append(run_id)
        assert started.returncode == 0, (started.stdout, started.stderr)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=240)
        status = await api.get_status(dev_client, run_id)
    assert result.outcome == "finished", (result, status.attention_reason)
    assert status.attempt == 1, status.restart_history
    branch = f"agent/{run_id}"
    assert origin_log(app, branch) == ["step 2", "step 1", "first"]
    assert origin_log(app, "HEAD") == ["first"]  # its own branch untouched
    # Still wholly the user's: nothing the worker (root or not) wrote there is another's.
    strangers = [p for p in app.rglob("*") if p.lstat().st_uid != owner]
    assert not strangers, strangers[:5]


async def test_a_repo_that_is_no_git_repository_is_refused_before_anything_runs(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    spec_file = newcomer_folder(tmp_path)
    spec = json.loads(spec_file.read_text())
    (tmp_path / "plain").mkdir()
    cases = {"missing": "../nowhere", "plain": "../plain"}
    files = {}
    for name, repo in cases.items():
        files[name] = spec_file.with_name(f"{name}.json")
        files[name].write_text(json.dumps({**spec, "repo": repo}))
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "no-repo", grants=parse_grants({})) as queue,
    ):
        done = await asyncio.gather(
            *(overnight_start(dev_server, f, queue) for f in files.values())
        )
        runs += [d.stdout.split("\n", 1)[0].removeprefix("started ") for d in done]
        for run_id in runs:
            status = await api.get_status(dev_client, run_id)
            assert status.attempt == 0, status  # no sandbox was made
    missing, plain = done
    fix = "give the path of a git repository on this worker (`git init` makes one)"
    assert missing.returncode == 2, (missing.stdout, missing.stderr)
    assert missing.stderr.strip().splitlines() == [
        f"overnight: spec: field repo: {tmp_path}/nowhere does not exist on this worker; {fix}"
    ]
    assert plain.returncode == 2, (plain.stdout, plain.stderr)
    assert plain.stderr.strip().splitlines() == [
        f"overnight: spec: field repo: {tmp_path}/plain is not a git repository; {fix}"
    ]
