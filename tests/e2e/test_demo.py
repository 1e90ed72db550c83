"""The demo scenario: the agent crashes after opening its pull request and still opens it once."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from overnight.demo.sample_demo import run_demo
from overnight.worker.devserver import DevServer
from tests.cli.test_cli import OVERNIGHT
from tests.cli.test_connect_messages import squatter
from tests.conftest import DEV_CONFIG_FILE, dev_config_on_free_ports, free_ports


async def test_demo_recovers_from_the_crash_with_exactly_two_outside_actions(
    dev_server: DevServer, dev_client: Client
) -> None:
    lines: list[str] = []
    started = time.monotonic()
    code = await run_demo(config=dev_server.config, out=lines.append)
    output = "\n".join(lines)
    assert code == 0, output
    # The demo is quick because the crash is acted on at once: no wait (a timer) between the
    # look that saw the agent crash and attempt 2's sandbox. The seconds are a measure only.
    run_id = re.search(r"started (demo-\S+):", output)
    assert run_id is not None, output
    seen, restarted = await crash_and_restart(dev_client, run_id.group(1))
    print(
        f"demo: {time.monotonic() - started:.1f} s in all, "
        f"{(restarted - seen).total_seconds():.1f} s from the crash seen to the restart"
    )
    assert "(reused)" in output  # the session's server, left running
    assert "finished after 2 attempts (1 restart" in output
    assert "attempt 1 ended: agent crashed" in output
    assert "2 outside actions in total" in output
    assert "\nsafety net: $" in output  # as the README's transcript shows it
    assert "-step-4: open_pull_request" in output
    assert "-step-5: post_summary" in output
    assert (
        f"Web UI: {dev_server.ui_url}/namespaces/{dev_server.namespace}/workflows/demo-" in output
    )


async def crash_and_restart(client: Client, run_id: str) -> tuple[datetime, datetime]:
    """When the run's last look at attempt 1 (the one that saw its agent crash) and attempt
    2's sandbox were asked for; asserts that no timer (a wait) was started between them."""
    events = (await client.get_workflow_handle(run_id).fetch_history()).events
    scheduled = [
        (i, e.activity_task_scheduled_event_attributes.activity_type.name)
        for i, e in enumerate(events)
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    creates = [i for i, name in scheduled if name == "create_sandbox"]
    assert len(creates) == 2, scheduled  # attempt 1's and attempt 2's
    looks = [i for i, name in scheduled if name == "observe_agent" and i < creates[1]]
    between = events[looks[-1] : creates[1]]
    waits = [e.event_id for e in between if e.HasField("timer_started_event_attributes")]
    assert waits == [], f"timers between the crash and the restart: {waits}"
    return events[looks[-1]].event_time.ToDatetime(), events[creates[1]].event_time.ToDatetime()


@pytest.mark.long
async def test_a_demo_on_a_held_port_moves_and_ends_without_a_link_to_its_stopped_server(
    tmp_path: Path,
) -> None:
    config = dev_config_on_free_ports(tmp_path)
    lines: list[str] = []
    with squatter(config.port):
        code = await run_demo(config=config, out=lines.append)
    output = "\n".join(lines)
    assert code == 0, output
    assert f"{config.address} is held by another program, so the dev server is at" in output
    assert "  export TEMPORAL_ADDRESS=127.0.0.1:" in output
    assert "(started)" in output
    started_at = next(i for i, line in enumerate(lines) if line.startswith("started demo-"))
    assert lines[started_at + 1].startswith("Web UI: http://127.0.0.1:")  # while it is up
    end = "\n".join(lines[started_at + 2 :])
    assert "Web UI:" not in end, end
    assert lines[-1] == (
        "the dev server is stopped now; `--keep-server` leaves it and the Web UI running"
    )


@pytest.mark.long
async def test_a_kept_server_is_named_with_the_process_that_stops_it(tmp_path: Path) -> None:
    # `overnight demo --keep-server` leaves the dev server it started behind it; its last lines
    # say which process that is, and the `kill` they name stops it (issue 51: a newcomer was
    # left to find it with ps).
    port, ui_port = free_ports(2)
    settings = tmp_path / "temporal-dev.yaml"
    text = re.sub(r"(?m)^port: \d+", f"port: {port}", DEV_CONFIG_FILE.read_text())
    settings.write_text(re.sub(r"(?m)^ui_port: \d+", f"ui_port: {ui_port}", text))
    demo = await asyncio.create_subprocess_exec(
        str(OVERNIGHT), "demo", "--keep-server", "--config", str(settings),
        env={**os.environ, "OVERNIGHT_HOME": str(tmp_path / "home")},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    printed, _ = await asyncio.wait_for(demo.communicate(), 300)
    output = printed.decode()
    pids = re.findall(r"`kill (\d+)` stops it", output)
    assert pids, output
    pid = int(pids[0])
    try:
        assert demo.returncode == 0, output
        assert (
            f"dev server left running at 127.0.0.1:{port} (process {pid}: `kill {pid}` stops it)"
            in output.splitlines()
        )
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == [
            b"server",
            b"start-dev",
        ]
    finally:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
        assert time.monotonic() < deadline, f"the dev server {pid} outlived its kill"
        await asyncio.sleep(0.2)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "gone"
