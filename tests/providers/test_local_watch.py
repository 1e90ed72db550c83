"""The local provider's watch, woken by the kernel: an agent's end through its pidfd or its
exit record (inotify), a checkpoint write through inotify, a worker that did not start the
agent, and a hostile agent flooding its workspace with writes.

Real sandboxes (bubblewrap) and real processes. The watches here have a backstop look of a
minute and wait up to a minute, so anything seen well within that was seen because the kernel
said so.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from activities.providers.local import launcher
from activities.providers.local.agent_looks import LocalLook
from activities.providers.local.engine import LocalEngine
from activities.providers.local.event_watch import event_watch
from activities.providers.local.provider import LocalProvider
from activities.providers.local.watch_hub import REARM_SECONDS, WatchHub, shared_hub
from activities.providers.protocol import Sighting, WatchRequest
from overnight.core.isolation import Isolation

CHECKPOINT = "/workspace/checkpoint.json"
BACKSTOP = 60.0
# A watch waiting for news: what it waits at most unless the kernel wakes it.
WINDOW = 60.0
# A kernel wake-up takes milliseconds, a second or two on a loaded machine; a watch the kernel
# did not wake returns at its window's end or its backstop look (60 s). 20 s tells the two apart
# under any load.
PROMPTLY = 20.0


class CountingEngine(LocalEngine):
    """The real engine, counting the looks at the checkpoint (one per watch look)."""

    looks = 0

    def stamp(self, sandbox_id: str, path: str) -> str:
        self.looks += 1
        return super().stamp(sandbox_id, path)


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[CountingEngine]:
    engine = CountingEngine(tmp_path / "home")
    try:
        yield engine
    finally:
        for meta in engine.list_sandboxes():
            engine.stop(meta.id)


def new_sandbox(engine: LocalEngine, isolation: Isolation = "bubblewrap") -> str:
    name = f"w-{uuid.uuid4().hex[:10]}"
    engine.get_or_create(name, timeout_seconds=600, memory_mib=512, isolation=isolation)
    return name


def start(engine: LocalEngine, sandbox_id: str, command: str, key: str = "a-1") -> str:
    record, _ = engine.start_process(sandbox_id, key, command, cwd="/workspace")
    return record.process_id


async def watch(
    engine: LocalEngine,
    sandbox_id: str,
    process_id: str,
    *,
    token: str | None,
    wait_seconds: float,
    report_touch: bool = True,
    hub: WatchHub | None = None,
) -> Sighting:
    hub = hub or shared_hub()
    assert hub is not None, "inotify is there on every machine the tests run on"
    look = LocalLook(engine, sandbox_id, process_id, CHECKPOINT)
    return await event_watch(
        hub,
        look,
        token=token,
        wait_seconds=wait_seconds,
        report_touch=report_touch,
        backstop=BACKSTOP,
    )


def started(engine: LocalEngine, sandbox_id: str, process_id: str) -> dict[str, int]:
    path = engine.folder(sandbox_id) / "processes" / process_id / launcher.PROCESS_FILE
    value: dict[str, int] = json.loads(path.read_text())
    return value


def write_checkpoint(engine: LocalEngine, sandbox_id: str, text: str) -> None:
    """As an agent writes it: a temporary file renamed into the folder."""
    target = engine.host_path(sandbox_id, CHECKPOINT)
    tmp = target.with_name(".checkpoint.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


async def test_an_agent_killed_with_its_launcher_is_noticed_through_its_pidfd(
    engine: CountingEngine,
) -> None:
    """With its launcher gone no exit record will ever come: only the agent's pidfd can
    tell the watch, within moments rather than at the backstop look. (Not isolated: an isolated
    agent's bubblewrap dies with its launcher.)"""
    sid = new_sandbox(engine, "none")
    pid = start(engine, sid, "sleep 600")
    first = await watch(engine, sid, pid, token=None, wait_seconds=5)
    record = started(engine, sid, pid)
    os.kill(record["launcher_pid"], signal.SIGKILL)
    waiting = asyncio.create_task(watch(engine, sid, pid, token=first.token, wait_seconds=WINDOW))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    killed_at = time.monotonic()
    os.kill(record["pid"], signal.SIGKILL)
    seen = await waiting
    assert seen.process.state == "killed"
    assert time.monotonic() - killed_at < PROMPTLY
    assert not (engine.folder(sid) / "processes" / pid / launcher.EXIT_FILE).exists()


async def test_a_checkpoint_written_into_its_folder_is_noticed_through_inotify(
    engine: CountingEngine,
) -> None:
    sid = new_sandbox(engine)
    pid = start(engine, sid, "sleep 600")
    token = (await watch(engine, sid, pid, token=None, wait_seconds=5)).token
    for step in range(3):
        waiting = asyncio.create_task(watch(engine, sid, pid, token=token, wait_seconds=WINDOW))
        await asyncio.sleep(REARM_SECONDS + 0.2)
        assert not waiting.done()
        written_at = time.monotonic()
        write_checkpoint(engine, sid, json.dumps({"step": step}))
        seen = await waiting
        assert seen.checkpoint_touched and seen.token != token
        assert time.monotonic() - written_at < PROMPTLY
        token = seen.token


async def test_a_worker_that_did_not_start_the_agent_notices_its_exit(
    engine: CountingEngine,
) -> None:
    """The agent is started by another process, which then exits (a worker restart): this
    one follows it by its pidfd, and without one by its exit record."""
    for use_pidfd in (True, False):
        sid = new_sandbox(engine)
        script = (
            "import sys; from activities.providers.local.engine import LocalEngine; "
            "e = LocalEngine(sys.argv[1]); "
            "e.start_process(sys.argv[2], 'a-1', 'sleep 1.5; exit 7', cwd='/workspace')"
        )
        subprocess.run([sys.executable, "-c", script, str(engine.home), sid], check=True)
        hub = WatchHub(asyncio.get_running_loop(), use_pidfd=use_pidfd)
        try:
            began = time.monotonic()
            seen = await watch(engine, sid, "a-1", token="missing", wait_seconds=WINDOW, hub=hub)
            assert (seen.process.state, seen.process.exit_code) == ("exited", 7)
            assert time.monotonic() - began < 1.5 + PROMPTLY
            ended_at = engine.process(sid, "a-1")
            assert ended_at is not None and ended_at.ended_at is not None
            assert time.time() - ended_at.ended_at < PROMPTLY
        finally:
            hub.close()


# Rewrites files of its workspace's root as fast as it can for a few seconds (a temporary
# file renamed, and a file written in place), never its checkpoint, then exits 5.
FLOOD = (
    'python3 -c "import os, time\nend = time.time() + 4\nn = 0\nwhile time.time() < end:\n'
    "    open('/workspace/.junk.tmp', 'w').write(str(n)); os.replace('/workspace/.junk.tmp',"
    " '/workspace/junk'); open('/workspace/other', 'w').write(str(n)); n += 1\n"
    "open('/workspace/count', 'w').write(str(n))\nraise SystemExit(5)\""
)


async def test_a_hostile_agent_flooding_its_folder_neither_hangs_nor_starves_the_worker(
    engine: CountingEngine,
) -> None:
    sid = new_sandbox(engine)
    pid = start(engine, sid, FLOOD)
    hub = shared_hub()
    assert hub is not None
    token = (await watch(engine, sid, pid, token=None, wait_seconds=5)).token
    lags: list[float] = []

    async def tick() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - before - 0.01)

    ticker = asyncio.create_task(tick())
    try:
        looks, events, began = engine.looks, hub.events_read, time.monotonic()
        quiet = await watch(engine, sid, pid, token=token, wait_seconds=2)
        # The whole wait (and not stuck past it: the backstop is 60 s), no touch (the checkpoint
        # never changed), and a bounded number of looks and events: one per re-arm of the
        # one-shot watch on the flooded folder.
        assert 1.9 <= time.monotonic() - began < 2 + PROMPTLY
        assert not quiet.checkpoint_touched and quiet.process.state == "running"
        bound = 2 / REARM_SECONDS + 4
        assert engine.looks - looks <= bound
        assert hub.events_read - events <= 2 * bound
        seen = await watch(engine, sid, pid, token=token, wait_seconds=WINDOW)
        assert (seen.process.state, seen.process.exit_code) == ("exited", 5)
        ended = engine.process(sid, pid)
        assert ended is not None and ended.ended_at is not None
        assert time.time() - ended.ended_at < PROMPTLY
    finally:
        ticker.cancel()
    flooded = int(engine.host_path(sid, "/workspace/count").read_text())
    # It did flood its folder, many times more writes than the watch's looks (a count, not
    # a rate: a loaded machine writes fewer in its four seconds).
    assert flooded > 10 * bound, "the agent did flood its folder"
    # The worker's loop kept turning: 0.05 s at most, measured, even with the one-shot watch
    # and the read budget both taken away (the counts of looks and events above are what
    # catch those). 2 s is a cap on a loop stalled outright, not a speed.
    assert max(lags) < 2


async def test_without_kernel_watching_the_timer_looks_still_notice_an_exit(
    engine: CountingEngine,
) -> None:
    provider = LocalProvider(engine, kernel_watch=False)
    sid = new_sandbox(engine)
    pid = start(engine, sid, "sleep 1; exit 4")
    seen = await provider.watch(
        WatchRequest(sid, pid, CHECKPOINT, token="missing", wait_seconds=30)
    )
    assert (seen.process.state, seen.process.exit_code) == ("exited", 4)


async def test_a_pidfd_is_closed_once_by_its_follower_never_under_a_later_fd() -> None:
    """The agent's end only wakes its follower; its pidfd stays open (the number ours) until
    the follower lets go. Closed at the end as well, the second close hit whatever had taken
    the number by then: in the suite, a loopback server's connection in another thread."""
    hub = WatchHub(asyncio.get_running_loop())
    try:
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        with hub.subscription() as sub:
            assert sub.follow_pid(child.pid, None)
            [pidfd] = sub._pidfds
            await sub.wait(10)
            child.wait()
            os.fstat(pidfd)  # still ours after the end: no fd can have taken its number
            later_r, later_w = os.pipe()
        # The follower let go: its pidfd is closed, the fds made meanwhile are not.
        with pytest.raises(OSError):
            os.fstat(pidfd)
        os.fstat(later_r)
        os.fstat(later_w)
        os.close(later_r)
        os.close(later_w)
    finally:
        hub.close()
