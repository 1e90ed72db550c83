"""The worker's floor of free space holds while its sandboxes run, not only at their create: an
agent whose writes take its host below `OVERNIGHT_MIN_FREE_MIB` is paused, with a reason that
says so, by the worker watching it; woken while the host is still below, it is paused again;
woken once there is room, it goes on.

The host here is a small filesystem of the test's own (a tmpfs for the worker's home), so the
free space is the test's alone, not the machine's, which the suite's other processes move by
about 1 GB. (The run's side, needing attention and woken by an extension:
tests/e2e/test_disk_limit.py.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.models import SandboxInfo
from activities.providers.local import disk_image, host_floor
from activities.providers.local.disk_limit import MIN_FREE_ENV
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch, SandboxRequest, WatchRequest
from overnight.core.constants import HOST_FLOOR_PREFIX, LABEL_RUN

HOST_MIB = 320
FLOOR_MIB = 200
# Past the floor (320 - 200 = 120 MiB of room), within the sandbox's own limit (256 MiB).
WRITES_MIB = 160
AGENT = (
    'echo \'{"next": "fill"}\' > /workspace/checkpoint.json; '
    f"dd if=/dev/zero of=/workspace/fill bs=1M count={WRITES_MIB} conv=fsync 2>/dev/null; "
    "sleep 600"
)
pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small filesystem for the home"),
]


@pytest.fixture
def small_host(tmp_path: Path) -> Iterator[Path]:
    """The worker's home on a filesystem of `HOST_MIB` of its own."""
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={HOST_MIB}m", "tmpfs", str(home)], check=True
    )
    engine = LocalEngine(home)
    try:
        yield home
    finally:
        for meta in engine.list_sandboxes():
            engine.stop(meta.id)
        disk_image.detach(home / "sandboxes")  # its images (not the tmpfs itself)
        subprocess.run(["umount", "-l", str(home)], check=False)


async def _watch_until(
    provider: LocalProvider, name: str, process_id: str, state: str
) -> SandboxInfo:
    give_up, token = time.monotonic() + 60, None
    while time.monotonic() < give_up:
        seen = await provider.watch(
            WatchRequest(
                name, process_id, "/workspace/checkpoint.json", token=token, wait_seconds=2
            )
        )
        token = seen.token
        if seen.sandbox.state == state:
            return seen.sandbox
    raise AssertionError(f"the sandbox was not {state} within 60 s")


async def test_a_running_sandbox_that_takes_its_host_below_the_floor_is_paused_saying_why(
    small_host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MIN_FREE_ENV, str(FLOOR_MIB))
    monkeypatch.setattr(host_floor, "INTERVAL", 0.2)
    provider = LocalProvider(LocalEngine(small_host))
    request = SandboxRequest(
        name="floor-1",
        labels={LABEL_RUN: "floor"},
        timeout_seconds=600,
        vcpu=1,
        memory_mib=512,
        disk_mib=256,
    )
    await provider.get_or_create(request)  # room enough: above the floor
    process = await provider.start_agent("floor-1", AgentLaunch("floor-1-1-0", AGENT, "/workspace"))

    paused = await _watch_until(provider, "floor-1", process.process_id, "paused")

    reason = paused.pause_reason or ""
    assert reason.startswith(HOST_FLOOR_PREFIX), paused
    assert f"under this worker's floor of {FLOOR_MIB} MiB ({MIN_FREE_ENV})" in reason
    assert str(small_host) in reason
    # Woken while still below the floor: paused again at the next check.
    await provider.wake("floor-1")
    again = await _watch_until(provider, "floor-1", process.process_id, "paused")
    assert (again.pause_reason or "").startswith(HOST_FLOOR_PREFIX)
    # Room again (here: a lower floor): woken, the same agent goes on.
    monkeypatch.setenv(MIN_FREE_ENV, "16")
    await provider.wake("floor-1")
    seen = await provider.watch(
        WatchRequest(
            "floor-1", process.process_id, "/workspace/checkpoint.json", token=None, wait_seconds=1
        )
    )
    assert seen.sandbox.state == "running" and seen.process.state == "running", seen
