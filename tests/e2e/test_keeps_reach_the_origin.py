"""A hostile agent against the workspace kept at its checkpoints, end to end (the real dev
server, real local sandboxes, the real withruntime SDK against the fake Runtime API): what the
status calls `pushed` is on the origin, with the commit it names, and `overnight diff --step N`
shows it.

The agent's git config sends pushes to a decoy in its sandbox (`url.*.pushInsteadOf` in its
HOME, `remote.origin.pushurl` and, for a URL origin, `remote.<url>.pushurl` in its clone): the
keeps go to the origin all the same. The agent turns the origin's `refs/overnight` into a link
to a folder only its sandbox sees: the keeps are recorded `failed`, and said, never `pushed`
(the worker, asking the origin itself, does not find them; through the gateway, the push
fails outright; tests/activities/test_workspace_keep_redirects.py has the sandbox's push land
in the hidden folder and say `pushed`); the first such keep holds the run for a person
(issue 50). On the code before (issue 47), the status said `pushed` for keeps the origin did
not hold, and `diff` failed.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.client import Client

from overnight.cli import client as api
from overnight.core.models import RunSpec
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_operator import overnight_cli
from tests.e2e.test_workspace_kept import workspace_spec
from tests.live import new_run_id, provider_world

DECOY = "/workspace/decoy.git"
# Run before the agent (AGENT of test_workspace_kept.py): $ORIGIN is the spec's repo; the
# clone's own remote is the address the sandbox reaches it by (a local origin: the gateway's).
REDIRECT = f"""set -e
git init -q --bare {DECOY}
git config remote.origin.pushurl {DECOY}
for origin in "$ORIGIN" "$(git config remote.origin.url)"; do
  git config --global --add "url.{DECOY}.pushInsteadOf" "$origin"
  case "$origin" in /*) ;; *) git config "remote.$origin.pushurl" {DECOY} ;; esac
done
"""
# The origin is bound writable into a local sandbox: its refs/overnight made a link to a
# folder of the sandbox's private /tmp (which the host's /tmp does not have). A push to the
# folder itself lands there, and the sandbox says `pushed`; a push through the worker's gateway
# (git on the host) cannot create the ref, and fails.
HIDE_REFS = """set -e
mkdir -p /tmp/overnight-hidden-refs
ln -s /tmp/overnight-hidden-refs "$ORIGIN/refs/overnight"
"""


def attacking_spec(
    root: Path,
    run_id: str,
    provider: str,
    attack: str,
    *,
    waits_for_keeps: bool = True,
    hold: float = 0.5,
) -> RunSpec:
    spec = workspace_spec(root, run_id, provider=provider, waits_for_keeps=waits_for_keeps)
    (root / "agent" / "attack.sh").write_text(attack)
    return spec.model_copy(
        update={
            "command": "bash /workspace/agent/attack.sh && python3 /workspace/agent/main.py",
            "env": {**spec.env, "STEPS": "2", "HOLD": str(hold), "ORIGIN": spec.repo},
        }
    )


def on_origin(repo: str, ref: str) -> str | None:
    """What the origin's `ref` holds, asked from here (None: no such ref)."""
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-remote", "--", repo, ref],
        capture_output=True,
        text=True,
        check=True,
    )
    found = [line.split("\t") for line in listed.stdout.splitlines()]
    return next((oid for oid, name in found if name == ref), None)


async def finished_keeps(client: Client, queue: str, spec: RunSpec) -> list[tuple[int, str]]:
    """Start the run, wait for its end, and say each keep's (number, outcome); every keep
    said `pushed` is on the origin with its commit."""
    await api.start_run(client, spec, task_queue=queue)
    result = await asyncio.wait_for(api.wait_result(client, spec.run_id), timeout=150)
    assert result.outcome == "finished"
    status = await api.get_status(client, spec.run_id)
    assert status.workspace is not None
    for kept in status.workspace.kept:
        if kept.outcome == "pushed":
            assert kept.ref is not None and kept.commit is not None
            assert on_origin(spec.repo, kept.ref) == kept.commit, kept
    return [(kept.number, kept.outcome) for kept in status.workspace.kept]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("provider", ["local", "runtime"])
async def test_the_agents_push_redirects_do_not_move_its_keeps_off_the_origin(
    dev_server: DevServer, dev_client: Client, tmp_path: Path, provider: str
) -> None:
    run_id = new_run_id(f"redirect-{provider[:2]}")
    spec = attacking_spec(tmp_path, run_id, provider, REDIRECT)
    async with provider_world(dev_client, provider, tmp_path, "redirect") as (queue, _, runs):
        runs.append(run_id)
        keeps = await finished_keeps(dev_client, queue, spec)
        assert keeps and {outcome for _, outcome in keeps} == {"pushed"}, keeps
        for number, _ in keeps:
            shown = await overnight_cli(dev_server, "diff", run_id, "--step", str(number))
            assert shown.returncode == 0, shown.stderr
            assert f"+++ b/step-{number}.txt" in shown.stdout


@pytest.mark.timeout(300)
async def test_keeps_the_origin_does_not_hold_are_failed_and_said_never_pushed(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = new_run_id("hidden-refs")
    # The agent does not wait for its keeps: none reaches the origin (it would wait a minute
    # for each).
    # Its steps 5 s apart: the first keep is made while it goes on. Ended at the first look,
    # its finish is decided before the held keep, and its pushed branch ends it (CI-form run).
    spec = attacking_spec(tmp_path, run_id, "local", HIDE_REFS, waits_for_keeps=False, hold=5)
    async with provider_world(dev_client, "local", tmp_path, "hidden") as (queue, _, runs):
        runs.append(run_id)
        # A keep the origin does not hold holds the run at once (issue 50): the work since the
        # last keep is only in its sandbox. A person would look; here, the run is cancelled.
        await api.start_run(dev_client, spec, task_queue=queue)
        status = await wait_for_status(
            dev_client,
            run_id,
            lambda s: s.state in ("needs_attention", "finished", "failed"),
            timeout=150,
        )
        assert status.state == "needs_attention", status
        reason = status.attention_reason or ""
        assert reason.startswith("the workspace kept at checkpoint 1 could not be pushed"), reason
        await api.cancel_run(dev_client, run_id, "its keeps cannot reach the origin")
        await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=120)
        status = await api.get_status(dev_client, run_id)
        assert status.workspace is not None
        keeps = [(kept.number, kept.outcome) for kept in status.workspace.kept]
        assert keeps and {outcome for _, outcome in keeps} == {"failed"}, keeps
        problem = status.workspace.problem or ""
        said_but_absent = "the sandbox said it pushed" in problem and "no such ref" in problem
        assert said_but_absent or "cannot lock ref" in problem, problem
        refused = await overnight_cli(dev_server, "diff", run_id, "--step", "1")
        assert refused.returncode == 2 and "was not kept" in refused.stderr
