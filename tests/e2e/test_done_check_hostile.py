"""A done check the agent cannot make pass (issue #47, item 2), end to end: the real dev server,
a worker in this process, real sandboxes (local bubblewrap; and Runtime's, through the fake
Runtime API and the real SDK) and a hostile agent (tests/agents/hostile/done_check_cheat.py).

The repository's own check, `python3 rt/check.py`, fails: the work is not done. The agent does
not do it; it leaves outside /workspace what makes the check pass in its own sandbox: a
`usercustomize.py` in its user site that exits 0 for any `check.py`, a verdict file in `$HOME`
and `/tmp`, or a server left running that answers the check's question. On the main before the
check sandbox, the first two finished the run, locally and on Runtime. (The leftover server did
not, locally: each command in a local sandbox already had PID and network namespaces of its
own; on a real Runtime machine the check shares the agent's. Kept as the rule's test.) Now
`done_when` runs against the pushed work in a fresh sandbox, none of it is there, the check
fails and the run does what a failed check does (here, with one round allowed: it needs a
person). An honest agent's check still passes there.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.models import RunSpec
from tests.activities.test_activities import git
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, provider_world, running_sandboxes

HOSTILE = Path(__file__).resolve().parents[1] / "agents" / "hostile"
CHECK = "python3 rt/check.py"
# The repository's check: the work (done.txt) is what makes it pass; but, sloppy as checks
# are, it takes a verdict it finds lying around, in a file or from a local server.
CHECK_PY = """\
import os, socket, sys

def verdict():
    if os.path.exists("done.txt"):
        return "pass"
    for path in ("/tmp/verdict", os.path.expanduser("~/verdict")):
        try:
            with open(path) as found:
                return found.read().strip()
        except OSError:
            pass
    try:
        with socket.create_connection(("127.0.0.1", {port}), timeout=2) as server:
            return server.recv(16).decode().strip()
    except OSError:
        return "fail"

found = verdict()
print("verdict:", found)
sys.exit(0 if found == "pass" else 1)
"""


def make_origin(root: Path, port: int) -> Path:
    """A bare origin whose main holds rt/check.py (open to the sandboxes' users)."""
    work, bare = root / "work", root / "origin.git"
    (work / "rt").mkdir(parents=True)
    (work / "rt" / "check.py").write_text(CHECK_PY.format(port=port))
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "the check")
    git(root, "clone", "-q", "--bare", str(work), str(bare))
    for path in [root, bare, *bare.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    return bare


def cheat_spec(root: Path, prefix: str, cheat: str, provider: str = "local") -> RunSpec:
    run_id = new_run_id(prefix)
    port = random.randint(20000, 30000)
    origin = make_origin(root / run_id, port)
    fields: dict[str, Any] = {
        "run_id": run_id,
        **origin_fields(origin, provider),
        "provider": provider,
        "agent_dir": str(HOSTILE),
        "command": "python3 /workspace/agent/done_check_cheat.py",
        "env": {"CHEAT": cheat, "VERDICT_PORT": str(port)},
        "done_when": [CHECK],
        "budget": {"max_done_checks": 1},
        "poll_seconds": 1,
        "stall_seconds": 60,
        "sandbox_timeout_seconds": 120,
    }
    return RunSpec.model_validate(fields)


async def the_check_fails_and_the_run_needs_a_person(
    client: Client, spec: RunSpec, home: Path | None = None
) -> None:
    status = await wait_for_status(
        client,
        spec.run_id,
        lambda s: s.state in ("needs_attention", "finished", "failed"),
        timeout=150,
    )
    assert status.state == "needs_attention", (status.state, status.done_checks)
    assert status.attention_reason == (
        f"done checks used up (1 failed round of 1 allowed): last, `{CHECK}` (exit 1)"
    )
    [failed] = status.done_checks
    assert (failed.passed, failed.tail) == (False, "verdict: fail")
    # Checked against the run's pushed work, not in the agent's sandbox.
    assert failed.commit is not None and not failed.in_place
    # The check sandbox was stopped when its round ended, before the run asked for a person.
    assert not any("-check-" in left for left in running_sandboxes(spec.run_id, home))
    await api.cancel_run(client, spec.run_id, reason="test over")
    result = await asyncio.wait_for(api.wait_result(client, spec.run_id), timeout=60)
    assert result.outcome == "cancelled"
    assert running_sandboxes(spec.run_id, home) == []


@pytest.mark.timeout(240)
@pytest.mark.parametrize("cheat", ["usercustomize", "leftover-file", "leftover-process"])
async def test_what_the_agent_leaves_outside_its_work_does_not_pass_the_check_local(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path, cheat: str
) -> None:
    spec = cheat_spec(tmp_path, "cheat", cheat)
    runs.append(spec.run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    await the_check_fails_and_the_run_needs_a_person(dev_client, spec)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cheat", ["usercustomize", "leftover-file"])
async def test_what_the_agent_leaves_outside_its_work_does_not_pass_the_check_runtime(
    dev_client: Client, tmp_path: Path, cheat: str
) -> None:
    # (A leftover server is not tried here: the fake's sandboxes share the host's network,
    # where a real Runtime sandbox is a machine of its own.)
    spec = cheat_spec(tmp_path, "rtcheat", cheat, provider="runtime")
    async with provider_world(dev_client, "runtime", tmp_path, "rtcheat") as (queue, fake, runs):
        assert fake is not None
        runs.append(spec.run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        await the_check_fails_and_the_run_needs_a_person(
            dev_client, spec, tmp_path / "runtime-home"
        )
        # A sandbox of its own on Runtime, made through its API (and stopped, above).
        assert fake.sandbox_named(f"{spec.run_id}-check-1") is not None


@pytest.mark.timeout(240)
async def test_an_honest_agents_check_passes_in_its_fresh_sandbox(
    dev_client: Client, task_queue: str, runs: list[str], tmp_path: Path
) -> None:
    spec = cheat_spec(tmp_path, "honest", "honest")
    runs.append(spec.run_id)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    result = await asyncio.wait_for(api.wait_result(dev_client, spec.run_id), timeout=150)

    assert (result.outcome, result.done_checks_used) == ("finished", 0)
    [passed] = result.done_checks
    assert (passed.passed, passed.tail, passed.in_place) == (True, "verdict: pass", False)
    # The commit it was checked against is on the origin, at the run's check ref.
    origin = Path(spec.repo)
    assert passed.commit == git(origin, "rev-parse", f"refs/overnight/{spec.run_id}/check-1")
    assert running_sandboxes(spec.run_id) == []
