"""A coding agent whose way to the gateway is lost mid-run meets its stall and is restarted,
through a real run: the dev server, a worker in this process, a bubblewrap sandbox, the real
pinned Claude Code CLI through the worker's gateway, the scripted fake model API.

The sandbox reaches the gateway through its relay (a host process carrying the sandbox's
loopback ports to the worker's). Killed after the first tool call, the CLI's next model request
finds nothing listening, and the CLI retries: the adapter rewrites its checkpoint as it does
(its notes, `next`) but its `progress_mark` stays, since no new work came. So the run stalls
`stall_seconds` after that tool call and restarts: the new sandbox has a relay of its own, its
CLI resumes the same session and finishes. Before, each rewrite counted as progress and the run
waited for ever in its first attempt."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from temporalio.client import Client

from fakes.model_api import FakeModelApi, Shell, text, tools
from fakes.model_api.turns import Answer
from overnight.cli import client as api
from overnight.worker.agent_clis import Installed
from tests.agent_clis.clis import parent
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.e2e.coding_agent_runs import (
    agents_queue,  # noqa: F401 (a fixture)
    claude_code,  # noqa: F401 (a fixture)
    cli_pids,
    credential,  # noqa: F401 (a fixture)
    fake_wait,
    named_pids,
    run_result,
    sandbox_ids,
    start_coding_run,
    until,
)

RESULT_TIMEOUT = 480  # a cap on the wait (the stall is 90 s; 110-200 s here in all)
# Longer than any gap between the adapter's rewrites as the CLI retries (its backoff between
# two tries reaches 32 s): with a shorter one the run stalled before this change too.
STALL_SECONDS = 90


def relay_of(pid: int) -> int | None:
    """The host process relaying the loopback ports of the sandbox that runs `pid`: a
    `port_relay.py` whose sandbox process is one of `pid`'s ancestors."""
    ancestors, at = set(), pid
    while at > 1:
        ancestors.add(at)
        at = parent(at)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as source:
                argv = source.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        script = next((i for i, arg in enumerate(argv) if arg.endswith("port_relay.py")), None)
        if script is not None and len(argv) > script + 1 and argv[script + 1].isdigit():
            if int(argv[script + 1]) in ancestors:
                return int(entry)
    return None


@pytest.mark.long
@pytest.mark.timeout(600)
async def test_a_sandbox_that_lost_its_way_to_the_gateway_stalls_and_restarts(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    script: list[Answer] = [
        tools(Shell("echo one > one.txt && exec sleep 5"), label="one"),
        text("Done in a new sandbox.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, "no-gateway",
            stall_seconds=STALL_SECONDS,
        )  # fmt: skip
        await fake_wait(fake.wait_for_answers, 1, timeout=120)
        await until(lambda: named_pids(spec.run_id, "sleep"), what="the tool call running")
        [cli] = cli_pids(spec.run_id)
        relay = relay_of(cli)
        assert relay is not None, "no relay found for the CLI's sandbox"
        os.kill(relay, signal.SIGKILL)  # the sandbox's way to the gateway, gone
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        status = await api.get_status(dev_client, spec.run_id)
        requests = fake.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
    [record] = status.restarts
    assert record.reason == f"agent stalled {STALL_SECONDS} s", record.reason
    assert len(await sandbox_ids(spec.run_id)) == 2
    # The second sandbox's CLI resumed the same session; the model answered it there.
    assert [r.label for r in requests] == ["one", "final"]
    assert fake.session_ids() == [requests[0].session_id]
