"""The workspace kept at every checkpoint, end to end (the real dev server, real local sandboxes,
and the real withruntime SDK against the fake Runtime API): an agent that writes files without
committing them and crashes finds them in its fresh sandbox; `overnight diff` shows them;
`overnight rewind` to checkpoint 2 of 5 re-does steps 3 to 5 from checkpoint 2's workspace and
checkpoint, on both providers; a workspace over the limit is said and the run goes on. (With a
failed done check: tests/e2e/test_done_check.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.cli.workspace import WorkspaceRefused, diff_text, rewind_run
from overnight.core.errors import OvernightError
from overnight.core.models import RunSpec
from overnight.core.workspace_spec import REF_ROOT, ref_name
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from overnight.worker.reaping import reap
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_operator import overnight_cli
from tests.live import in_process_worker, new_run_id, nothing_left_running, provider_world

# Steps 1..STEPS: each writes step-<k>.txt (never committed), then the checkpoint, then holds.
# It records which step files it found at each attempt's start, and exits 3 after CRASH_AFTER
# on its first attempt; WAIT_AT_END holds the first attempt after its last step. With KEPT_IN
# ("<repo>|<run id>") it holds after each checkpoint until the run has kept it (one ref more in
# the repo, asked with `git ls-remote`), up to 60 s: a workspace is kept as the run finds it
# when it sees the checkpoint change, so a loaded machine's late look would keep the next
# step's file with it, or see two checkpoints as one.
AGENT = """\
import json, os, pathlib, subprocess, sys, time
def kept():
    repo, run = os.environ["KEPT_IN"].split("|")
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-remote", repo, f"refs/overnight/{run}/*"],
        capture_output=True, text=True)
    return len(listed.stdout.splitlines())
waits = "KEPT_IN" in os.environ
cp = pathlib.Path(os.environ["OVERNIGHT_CHECKPOINT"])
attempt = os.environ["OVERNIGHT_ATTEMPT"]
state = json.loads(cp.read_text()) if cp.exists() else {"step": 0, "log": [], "found": {}}
app = pathlib.Path.cwd()
state["found"][attempt] = sorted(p.name for p in app.glob("step-*.txt"))
steps, hold = int(os.environ.get("STEPS", "3")), float(os.environ.get("HOLD", "1.5"))
while state["step"] < steps:
    k = state["step"] + 1
    (app / f"step-{k}.txt").write_text(f"written by attempt {attempt}\\n")
    if k == 1 and os.environ.get("BIG_MIB"):
        (app / "big.bin").write_bytes(os.urandom(int(float(os.environ["BIG_MIB"]) * 2**20)))
    state.update(step=k, next=f"step {k + 1}")
    state["log"].append(f"a{attempt}:s{k}")
    before = kept() if waits else 0
    tmp = cp.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(cp)
    deadline = time.monotonic() + 60
    while waits and kept() <= before and time.monotonic() < deadline:
        time.sleep(0.3)
    time.sleep(hold)
    if attempt == "1" and k == int(os.environ.get("CRASH_AFTER", "0")):
        sys.exit(3)
if attempt == "1" and os.environ.get("WAIT_AT_END"):
    time.sleep(float(os.environ["WAIT_AT_END"]))
"""


def refs_in(origin: Path, run_id: str) -> list[str]:
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "for-each-ref", "--format=%(refname)", REF_ROOT],
        cwd=origin,
        capture_output=True,
        text=True,
        check=True,
    )
    return [ref for ref in listed.stdout.split() if f"/{run_id}/" in ref]


def refs_in_order(run_id: str, count: int) -> list[str]:
    return sorted(ref_name(run_id, n) for n in range(1, count + 1))


def workspace_spec(
    root: Path,
    run_id: str,
    provider: str = "local",
    *,
    waits_for_keeps: bool = False,
    **changes: Any,
) -> RunSpec:
    agent = root / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "main.py").write_text(AGENT)
    files = make_origin(root / run_id)
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(files.origin, provider),
        "provider": provider,
        "agent_dir": str(agent),
        "command": "python3 /workspace/agent/main.py",
        "poll_seconds": 1,
        "stall_seconds": 60,
        "sandbox_timeout_seconds": 120,
        "keep_workspace": True,
        **changes,
    }
    if waits_for_keeps:  # the agent holds after each checkpoint until its keep's ref is there
        fields["env"] = {**fields.get("env", {}), "KEPT_IN": f"{fields['repo']}|{run_id}"}
    return RunSpec.model_validate(fields)


async def _crash_and_come_back(client: Client, queue: str, spec: RunSpec) -> dict[str, Any]:
    await api.start_run(client, spec, task_queue=queue)
    result = await asyncio.wait_for(api.wait_result(client, spec.run_id), timeout=120)
    assert (result.outcome, result.attempts) == ("finished", 2)
    assert result.checkpoint is not None
    done: dict[str, Any] = json.loads(result.checkpoint)
    return done


@pytest.mark.timeout(240)
async def test_files_written_and_not_committed_survive_a_crash_and_diff_shows_them(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("keepcrash")
    env = {"STEPS": "3", "CRASH_AFTER": "2", "HOLD": "1"}
    spec = workspace_spec(tmp_path, run_id, env=env, waits_for_keeps=True)
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "keepcrash") as queue,
    ):
        runs.append(run_id)
        done = await _crash_and_come_back(dev_client, queue, spec)
        # The fresh sandbox had what the crashed agent wrote before its last checkpoint.
        assert done["found"] == {"1": [], "2": ["step-1.txt", "step-2.txt"]}
        assert done["log"] == ["a1:s1", "a1:s2", "a2:s3"]

        status = await api.get_status(dev_client, run_id)
        view = status.workspace
        assert view is not None and view.base is not None and view.problem is None
        assert [k.outcome for k in view.kept] == ["pushed"] * 3
        # `overnight diff` shows them, from the run's base to the last kept workspace ...
        shown = await overnight_cli(dev_server, "diff", run_id, "--stat")
        assert shown.returncode == 0, shown.stderr
        assert all(f"step-{k}.txt" in shown.stdout for k in (1, 2, 3))
        # ... or to checkpoint 1's.
        first = await overnight_cli(dev_server, "diff", run_id, "--step", "1")
        assert first.returncode == 0, first.stderr
        assert "+written by attempt 1" in first.stdout
        assert "step-1.txt" in first.stdout and "step-2.txt" not in first.stdout
        missing = await overnight_cli(dev_server, "diff", run_id, "--step", "9")
        assert missing.returncode == 2 and "no checkpoint 9" in missing.stderr
        # The refs go with the run's retention (keep_failed_days, 3), not before.
        origin = Path(spec.repo)
        assert len(refs_in(origin, run_id)) == 3
        assert not [e for e in await reap(dev_client, {}) if e.run_id == run_id]
        later = datetime.now(UTC) + timedelta(days=3, hours=1)
        reaped = [e for e in await reap(dev_client, {}, now=later) if e.run_id == run_id]
        assert sorted(e.sandbox_id for e in reaped) == refs_in_order(run_id, 3)
        assert all(e.stopped and e.kind == "workspace" for e in reaped)
        assert refs_in(origin, run_id) == []
        with pytest.raises(OvernightError, match="git fetch failed"):
            diff_text(spec.repo, view.kept[-1], view.base)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("provider", ["local", "runtime"])
@pytest.mark.long
async def test_rewind_to_checkpoint_2_of_5_redoes_steps_3_to_5_from_its_workspace(
    dev_client: Client, tmp_path: Path, provider: str
) -> None:
    run_id = new_run_id(f"rewind-{provider[:2]}")
    env = {"STEPS": "5", "HOLD": "0.5", "WAIT_AT_END": "90"}
    spec = workspace_spec(tmp_path, run_id, provider=provider, env=env, waits_for_keeps=True)
    async with provider_world(dev_client, provider, tmp_path, "rewind") as (queue, fake, runs):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)

        def five_kept(status: Any) -> bool:
            kept = status.workspace.kept if status.workspace else []
            return [k.outcome for k in kept] == ["pushed"] * 5

        await wait_for_status(dev_client, run_id, five_kept, timeout=60)
        with pytest.raises(WorkspaceRefused, match="no checkpoint 9"):
            await rewind_run(dev_client, run_id, 9)
        said = await rewind_run(dev_client, run_id, 2)
        assert "rewinding to checkpoint 2" in said

        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=90)
        assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 0)
        done = json.loads(result.checkpoint or "{}")
        # Checkpoint 2's checkpoint and workspace: steps 3 to 5 done again, by attempt 2.
        assert done["log"] == ["a1:s1", "a1:s2", "a2:s3", "a2:s4", "a2:s5"]
        assert done["found"]["2"] == ["step-1.txt", "step-2.txt"]
        status = await api.get_status(dev_client, run_id)
        assert status.workspace is not None and status.workspace.rewinds == 1
        numbers = [k.number for k in status.workspace.kept if k.outcome == "pushed"]
        assert numbers == [1, 2, 3, 4, 5, 6, 7, 8]  # the later refs stay; new ones follow
        assert "rewound to checkpoint 2" in status.restarts[-1].reason
        if fake is not None:  # a fresh Runtime sandbox for the rewind, the first set aside
            assert fake.sandbox_named(f"{run_id}-2") is not None


@pytest.mark.timeout(240)
async def test_a_workspace_over_the_limit_is_said_and_the_run_goes_on(
    dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("keepbig")
    # Three checkpoints 2.5 s apart: the run sees at least two of them (its first look may come
    # after the first under load; its end reads the last), and keeps none, each over the limit.
    spec = workspace_spec(
        tmp_path, run_id, max_workspace_mib=1, env={"STEPS": "3", "HOLD": "2.5", "BIG_MIB": "2"}
    )
    quiet_id = new_run_id("nokeep")
    quiet = workspace_spec(
        tmp_path, quiet_id, keep_workspace=False, env={"STEPS": "1", "WAIT_AT_END": "60"}
    )
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "keepbig") as queue,
    ):
        runs += [run_id, quiet_id]
        await api.start_run(dev_client, spec, task_queue=queue)
        await api.start_run(dev_client, quiet, task_queue=queue)
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=90)
        assert result.outcome == "finished"
        status = await api.get_status(dev_client, run_id)
        assert status.workspace is not None
        outcomes = [k.outcome for k in status.workspace.kept]
        assert len(outcomes) >= 2 and set(outcomes) == {"over_limit"}, outcomes
        assert "over max_workspace_mib" in (status.workspace.problem or "")
        # A run that keeps no workspace refuses a rewind, saying why.
        await wait_for_status(dev_client, quiet_id, lambda s: s.checkpoint_bytes > 0)
        with pytest.raises(WorkspaceRefused, match="does not keep its workspace"):
            await rewind_run(dev_client, quiet_id, 1)
        await api.cancel_run(dev_client, quiet_id)


@pytest.mark.timeout(240)
async def test_on_runtime_a_crashed_agents_uncommitted_files_reach_its_fresh_sandbox(
    dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("rtkeep")
    spec = workspace_spec(
        tmp_path, run_id, provider="runtime", env={"STEPS": "3", "CRASH_AFTER": "2"}
    )
    async with provider_world(dev_client, "runtime", tmp_path, "rtkeep") as (queue, _, runs):
        runs.append(run_id)
        done = await _crash_and_come_back(dev_client, queue, spec)
        assert done["found"] == {"1": [], "2": ["step-1.txt", "step-2.txt"]}
        status = await api.get_status(dev_client, run_id)
        assert status.workspace is not None
        latest = status.workspace.kept[-1]
        text = diff_text(spec.repo, latest, status.workspace.base, stat=True)
        assert all(f"step-{k}.txt" in text for k in (1, 2, 3))
