"""The demo scenario: the agent crashes after opening its pull request and still opens it once."""

from __future__ import annotations

import time

from overnight.cli.demo import run_demo
from overnight.worker.devserver import DevServer


async def test_demo_recovers_from_the_crash_with_exactly_two_outside_actions(
    dev_server: DevServer,
) -> None:
    lines: list[str] = []
    started = time.monotonic()
    code = await run_demo(config=dev_server.config, out=lines.append)
    output = "\n".join(lines)
    assert code == 0, output
    assert time.monotonic() - started < 60
    assert "(reused)" in output  # the session's server, left running
    assert "finished after 2 attempts (1 restart" in output
    assert "attempt 1 ended: agent crashed" in output
    assert "2 outside actions in total" in output
    assert "-step-4: open_pull_request" in output
    assert "-step-5: post_summary" in output
    assert (
        f"Web UI: {dev_server.ui_url}/namespaces/{dev_server.namespace}/workflows/demo-" in output
    )
