"""What every sandbox provider must do, run against each one (see conftest.FACTORIES).

Real processes and real files: agents are small bash loops whose progress is a file's size.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from activities.models import SandboxInfo
from activities.providers.protocol import AgentLaunch, ProcessInfo, SandboxRequest, WatchRequest
from activities.providers.runtime.watch_stream import exit_marker_path
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN
from tests.providers.conftest import Harness
from tests.waits import CAP

# Appends a line to /workspace/ticks ten times a second, for a minute.
TICKER = "for i in $(seq 600); do echo $i >> /workspace/ticks; sleep 0.1; done"


def request(
    name: str | None = None,
    *,
    timeout: float = 600,
    run: str = "r",
    on_lease_end: Literal["pause", "stop"] = "pause",
) -> SandboxRequest:
    return SandboxRequest(
        name=name or f"t-{uuid.uuid4().hex[:10]}",
        labels={LABEL_RUN: run, LABEL_ATTEMPT: "1"},
        timeout_seconds=timeout,
        vcpu=1,
        memory_mib=512,
        on_lease_end=on_lease_end,
    )


async def new_sandbox(
    h: Harness, *, timeout: float = 600, on_lease_end: Literal["pause", "stop"] = "pause"
) -> SandboxInfo:
    info, created = await h.provider.get_or_create(
        request(timeout=timeout, on_lease_end=on_lease_end)
    )
    assert created and info.state == "running"
    return info


async def start(h: Harness, sandbox_id: str, command: str, key: str = "k-1") -> ProcessInfo:
    return await h.provider.start_agent(
        sandbox_id, AgentLaunch(start_key=key, command=command, cwd="/workspace")
    )


async def wait_for_process(h: Harness, sid: str, pid: str, timeout: float = CAP) -> ProcessInfo:
    give_up = time.monotonic() + timeout
    while True:
        info = await h.provider.process(sid, pid)
        if info.state != "running" or time.monotonic() > give_up:
            return info
        await asyncio.sleep(0.05)


async def wait_for_state(h: Harness, sid: str, state: str, timeout: float = CAP) -> SandboxInfo:
    give_up = time.monotonic() + timeout
    while True:
        info = await h.provider.sandbox(sid)
        if info.state == state or time.monotonic() > give_up:
            return info
        await asyncio.sleep(0.05)


def bytes_read_here() -> int:
    """Bytes this process has read so far (every thread's: the runtime fake serves from one)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def ticks(h: Harness, sid: str) -> int:
    path = h.host_path(sid, "/workspace/ticks")
    return len(path.read_text().split()) if path.exists() else 0


async def ticking(h: Harness, sid: str) -> bool:
    """Whether the ticker makes progress over half a second (to show it stopped)."""
    before = ticks(h, sid)
    await asyncio.sleep(0.5)
    return ticks(h, sid) > before


async def ticks_on(h: Harness, sid: str, timeout: float = CAP) -> bool:
    """Whether the ticker makes progress within `timeout` (to show it runs: a sandbox's first
    process may take seconds to start on a loaded machine)."""
    before = ticks(h, sid)
    give_up = time.monotonic() + timeout
    while ticks(h, sid) <= before:
        if time.monotonic() > give_up:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_create_is_idempotent_by_name(provider: Harness) -> None:
    wanted = request(run="idem")
    first, created = await provider.provider.get_or_create(wanted)
    again, created_again = await provider.provider.get_or_create(wanted)
    assert (created, created_again) == (True, False)
    assert again.sandbox_id == first.sandbox_id
    assert again.labels == {LABEL_RUN: "idem", LABEL_ATTEMPT: "1"}
    listed = await provider.provider.list({LABEL_RUN: "idem"}, include_stopped=False)
    assert [s.sandbox_id for s in listed] == [first.sandbox_id]


async def test_the_same_start_key_starts_the_agent_once(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    command = "echo started >> /workspace/starts; sleep 30"
    first = await start(provider, sid, command)
    second = await start(provider, sid, command)
    assert second.process_id == first.process_id
    starts = provider.host_path(sid, "/workspace/starts")
    give_up = time.monotonic() + CAP
    # Its text, not only the file: the shell makes the file before echo writes to it.
    while not (starts.exists() and starts.read_text()) and time.monotonic() < give_up:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # time for a second agent, if one had been started, to write
    assert starts.read_text() == "started\n"


async def test_exit_codes_are_read_back(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    done = await start(provider, sid, "exit 0", key="ok")
    crashed = await start(provider, sid, "echo boom >&2; exit 3", key="crash")
    fresh = await start(provider, sid, "exit 75", key="fresh")
    results = [await wait_for_process(provider, sid, p.process_id) for p in (done, crashed, fresh)]
    assert [(r.state, r.exit_code) for r in results] == [
        ("exited", 0),
        ("exited", 3),
        ("exited", 75),
    ]


async def test_an_agent_killed_by_a_signal_reads_as_killed(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await start(provider, sid, "kill -KILL $$")
    ended = await wait_for_process(provider, sid, agent.process_id)
    assert (ended.state, ended.exit_code) == ("killed", None)


async def test_a_sandbox_at_its_lease_end_pauses_with_its_agent_frozen_and_its_files_kept(
    provider: Harness,
) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await start(provider, sid, TICKER)
    assert await ticks_on(provider, sid)
    provider.end_lease_in(sid, 0.5)
    paused = await wait_for_state(provider, sid, "paused")
    assert paused.state == "paused"
    assert not await ticking(provider, sid)
    assert ticks(provider, sid) > 0
    # Frozen, not dead: woken, it carries on where it was, with a fresh lease.
    woken = await provider.provider.wake(sid)
    assert woken.state == "running"
    assert woken.lease_ends_at is not None
    assert (woken.lease_ends_at - datetime.now(UTC)).total_seconds() > 500
    assert (await provider.provider.process(sid, agent.process_id)).state == "running"
    assert await ticks_on(provider, sid)


async def test_a_sandbox_made_to_stop_at_its_lease_end_stops_with_reason_lease_expired(
    provider: Harness,
) -> None:
    sid = (await new_sandbox(provider, on_lease_end="stop")).sandbox_id
    agent = await start(provider, sid, TICKER)
    assert await ticks_on(provider, sid)
    provider.end_lease_in(sid, 0.5)
    stopped = await wait_for_state(provider, sid, "stopped")
    assert (stopped.state, stopped.stop_reason) == ("stopped", "lease_expired")
    assert (await wait_for_process(provider, sid, agent.process_id)).state == "killed"
    assert not await ticking(provider, sid)


async def test_a_paused_agent_makes_no_progress(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await start(provider, sid, TICKER)
    assert await ticks_on(provider, sid)
    paused = await provider.provider.pause(sid)
    assert paused.state == "paused"
    assert not await ticking(provider, sid)
    # Frozen, not dead: the process is still there.
    assert (await provider.provider.process(sid, agent.process_id)).state == "running"
    assert (await provider.provider.pause(sid)).state == "paused"  # pausing again is fine


async def test_a_stopped_sandbox_has_its_agent_killed(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await start(provider, sid, TICKER)
    assert await ticks_on(provider, sid)
    stopped = await provider.provider.stop(sid)
    assert stopped.state == "stopped" and stopped.stop_reason != "lease_expired"
    assert (await wait_for_process(provider, sid, agent.process_id)).state == "killed"
    assert not await ticking(provider, sid)
    assert (await provider.provider.stop(sid)).state == "stopped"  # stopping again is fine
    assert await provider.provider.list({LABEL_RUN: "r"}, include_stopped=False) == []
    with_stopped = await provider.provider.list({LABEL_RUN: "r"}, include_stopped=True)
    assert [s.sandbox_id for s in with_stopped] == [sid]


async def test_extend_moves_the_deadline(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    await start(provider, sid, TICKER)
    provider.end_lease_in(sid, 1.5)
    # Far past the first deadline: a loaded machine's late wake-up must not reach the new one.
    extended = await provider.provider.extend(sid, 60)
    assert extended.state == "running"
    await asyncio.sleep(2.0)  # past the first deadline
    assert (await provider.provider.sandbox(sid)).state == "running"
    assert await ticks_on(provider, sid)


async def test_a_checkpoint_over_the_cap_is_refused_without_reading_it(
    provider: Harness,
) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    # 8 GiB, sparse: refused from its size (or past the cap of a stream given up), not read.
    made = await provider.provider.run(sid, "truncate -s 8G /workspace/checkpoint.json")
    assert made.exit_code == 0, made.stderr
    before = bytes_read_here()
    read = await provider.provider.read_file(sid, "/workspace/checkpoint.json", 262144)
    assert (read.status, read.data) == ("too_large", None)
    assert read.size > 262144
    # Read in this process (by the provider, or the fake Runtime serving it): the cap and a
    # stream's buffers (measured: 1.5 KB local, 1 MiB runtime), where reading it whole is 8 GiB.
    # Bytes, not seconds: reading the 8 GiB took 1 to 17 s here, as the machine's load went.
    assert bytes_read_here() - before < 64 * 1024**2


async def test_a_checkpoint_at_the_cap_is_read(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    await provider.provider.write_file(sid, "/workspace/state/cp.json", b"x" * 100)
    read = await provider.provider.read_file(sid, "/workspace/state/cp.json", 100)
    assert (read.status, read.data) == ("ok", b"x" * 100)


async def test_a_missing_checkpoint_is_missing_not_an_error(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    read = await provider.provider.read_file(sid, "/workspace/checkpoint.json", 1000)
    assert (read.status, read.data) == ("missing", None)


async def test_a_symlink_leading_outside_the_sandbox_is_outside(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    linked = await provider.provider.run(sid, "ln -s /etc/hostname /workspace/checkpoint.json")
    assert linked.exit_code == 0, linked.stderr
    read = await provider.provider.read_file(sid, "/workspace/checkpoint.json", 1000)
    assert (read.status, read.data) == ("outside", None)
    assert (await provider.provider.read_file(sid, "/etc/hostname", 1000)).status == "outside"


async def test_commands_run_in_the_workspace_with_a_timeout(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    await provider.provider.run(sid, "mkdir -p /workspace/app && echo hi > /workspace/app/f")
    found = await provider.provider.run(sid, "cat f; exit 4", cwd="/workspace/app")
    assert (found.exit_code, found.stdout) == (4, "hi\n")
    slow = await provider.provider.run(sid, "sleep 20", timeout_seconds=0.5)
    assert slow.timed_out and slow.exit_code is None


async def test_an_agent_folder_is_uploaded_and_merged(provider: Harness, tmp_path: Path) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = tmp_path / "agent"
    (agent / "lib").mkdir(parents=True)
    (agent / "main.py").write_text("print('hi')\n")
    (agent / "lib" / "util.py").write_text("X = 1\n")
    await provider.provider.write_file(sid, "/workspace/agent/keep.txt", b"kept")
    await provider.provider.upload_dir(sid, str(agent), "/workspace/agent")
    listed = await provider.provider.run(sid, "find . -type f | sort", cwd="/workspace/agent")
    assert listed.stdout.split() == ["./keep.txt", "./lib/util.py", "./main.py"]


async def test_a_gone_sandbox_reads_as_missing(provider: Harness) -> None:
    assert (await provider.provider.sandbox("no-such-sandbox")).state == "missing"
    gone = await provider.provider.process("no-such-sandbox", "no-such-process")
    assert gone.state == "missing"


# ---- watching ----------------------------------------------------------------------------

CHECKPOINT = "/workspace/checkpoint.json"
# What a watch waits at most for news; WOKEN separates news seen as it came (3 s of writes, then
# the exit: seconds even on a loaded machine) from a watch that waited out its window.
WINDOW = 60.0
WOKEN = 30.0
# Writes a checkpoint atomically every 0.3 s, ten times, then exits 3 (a crash).
WRITER = (
    'for i in $(seq 10); do echo "{\\"step\\": $i}" > /workspace/.cp.tmp && '
    "mv /workspace/.cp.tmp /workspace/checkpoint.json; sleep 0.3; done; exit 3"
)


def launch(command: str, key: str = "w-1") -> AgentLaunch:
    return AgentLaunch(
        start_key=key,
        command=command,
        cwd="/workspace",
        exit_marker=exit_marker_path(CHECKPOINT, key),
    )


async def test_a_watch_wakes_up_for_a_checkpoint_write_and_then_for_the_crash(
    provider: Harness,
) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await provider.provider.start_agent(sid, launch(WRITER))
    token: str | None = None
    touched = 0
    began = time.monotonic()
    while True:
        seen = await provider.provider.watch(
            WatchRequest(sid, agent.process_id, CHECKPOINT, token=token, wait_seconds=WINDOW)
        )
        token = seen.token
        touched += seen.checkpoint_touched
        if seen.process.state != "running":
            break
        assert time.monotonic() - began < WOKEN, "the watches waited out their windows"
    # Ten writes in three seconds: seen as they came (a watch that slept through them would
    # see one touch, at its window's end), and the exit within moments of it.
    assert touched >= 2
    assert (seen.process.state, seen.process.exit_code) == ("exited", 3)
    assert time.monotonic() - began < WOKEN, "the exit was seen at the window's end"


async def test_a_quiet_watch_waits_its_whole_time_and_reports_nothing(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await provider.provider.start_agent(sid, launch("sleep 60"))
    first = await provider.provider.watch(
        WatchRequest(sid, agent.process_id, CHECKPOINT, token=None, wait_seconds=5)
    )
    began = time.monotonic()
    quiet = await provider.provider.watch(
        WatchRequest(sid, agent.process_id, CHECKPOINT, token=first.token, wait_seconds=1.5)
    )
    # Its whole 1.5 s, and over then: not at a backstop look (10 s) or when a held stream's
    # request ends (~110 s).
    assert 1.4 <= time.monotonic() - began < 8
    assert not quiet.checkpoint_touched
    assert (quiet.sandbox.state, quiet.process.state) == ("running", "running")


async def test_a_watch_reports_a_pause_without_waking_the_sandbox(provider: Harness) -> None:
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await provider.provider.start_agent(sid, launch(TICKER))
    first = await provider.provider.watch(
        WatchRequest(sid, agent.process_id, CHECKPOINT, token=None, wait_seconds=5)
    )
    provider.end_lease_in(sid, 0.5)
    seen = await provider.provider.watch(
        WatchRequest(sid, agent.process_id, CHECKPOINT, token=first.token, wait_seconds=10)
    )
    assert seen.sandbox.state == "paused"
    await asyncio.sleep(0.5)
    assert (await provider.provider.sandbox(sid)).state == "paused"
    assert not await ticking(provider, sid)


async def test_a_watch_with_no_time_left_still_reports_an_exit_that_happened(
    provider: Harness,
) -> None:
    """A retried observe near its deadline waits zero seconds: it must still look."""
    sid = (await new_sandbox(provider)).sandbox_id
    agent = await provider.provider.start_agent(sid, launch("sleep 0.5; exit 3"))
    first = await provider.provider.watch(
        WatchRequest(sid, agent.process_id, CHECKPOINT, token=None, wait_seconds=5)
    )
    # Exited by now (waited for, capped: a loaded machine may take longer than its 0.5 s);
    # nobody watched.
    assert (await wait_for_process(provider, sid, agent.process_id)).state == "exited"
    seen = await provider.provider.watch(
        WatchRequest(sid, agent.process_id, CHECKPOINT, token=first.token, wait_seconds=0)
    )
    assert (seen.process.state, seen.process.exit_code) == ("exited", 3)
