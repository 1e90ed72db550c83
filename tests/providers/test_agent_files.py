"""An agent's files are agent bytes: whatever it leaves at a path the worker reads or writes,
the worker's threads never block, no descriptor leaks, no symlink is followed, and nothing
is written outside its workspace. Real local sandboxes, real files (the local provider).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from activities.models import ObserveInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.files import WorkspaceMap, write_inside
from activities.providers.local.forensics import LocalForensics
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch, ProviderError
from activities.sandbox.observe import observe
from tests.providers.test_behaviour import request
from tests.waits import CAP

CHECKPOINT = "/workspace/checkpoint.json"


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    try:
        yield provider
    finally:
        for info in await provider.list({}, include_stopped=False):
            await provider.stop(info.sandbox_id)


async def sandbox(provider: LocalProvider) -> str:
    info, _ = await provider.get_or_create(request(f"files-{uuid.uuid4().hex[:10]}"))
    return info.sandbox_id


def host(provider: LocalProvider, sid: str, path: str = CHECKPOINT) -> Path:
    return provider.engine.host_path(sid, path)


@contextmanager
def unblocked_fifos(fifos: list[Path]) -> Iterator[None]:
    """On the way out, open each FIFO's writing end once: a reader stuck in open() (the code
    before the fix) is released, so a failing test ends instead of hanging the session."""
    try:
        yield
    finally:
        for fifo in fifos:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue  # no reader waiting: nothing to release
            os.close(fd)


async def test_a_fifo_as_the_checkpoint_is_refused_at_once_saying_what_it_is(
    local: LocalProvider,
) -> None:
    sid = await sandbox(local)
    os.mkfifo(host(local, sid))
    with unblocked_fifos([host(local, sid)]):
        # A cap, not a speed: a read that opened the FIFO would block until the release below.
        read = await asyncio.wait_for(local.read_file(sid, CHECKPOINT, 1000), timeout=CAP)
    assert (read.status, read.data) == ("refused", None)
    assert "FIFO" in read.detail


async def test_six_fifo_checkpoints_in_six_sandboxes_do_not_stop_a_seventh_runs_reads(
    local: LocalProvider,
) -> None:
    fifos = []
    for _ in range(6):
        sid = await sandbox(local)
        os.mkfifo(host(local, sid))
        fifos.append((sid, host(local, sid)))
    good = await sandbox(local)
    host(local, good).write_bytes(b'{"step": 7}')
    with unblocked_fifos([path for _, path in fifos]):
        # Every FIFO read twice (a retried look), then the seventh run's, all at once. The caps
        # are not speeds: a read stuck in a FIFO's open() stays stuck until the release on the
        # way out, and so does any read or step queued behind it.
        bad = [local.read_file(sid, CHECKPOINT, 1000) for sid, _ in fifos * 2]
        reads = await asyncio.wait_for(
            asyncio.gather(*bad, local.read_file(good, CHECKPOINT, 1000)), timeout=CAP
        )
        # And the worker's other steps, on the default executor, still run.
        info = await asyncio.wait_for(local.sandbox(good), timeout=CAP)
    assert [r.status for r in reads[:-1]] == ["refused"] * 12
    assert (reads[-1].status, reads[-1].data) == ("ok", b'{"step": 7}')
    assert info.state == "running"


async def test_an_agent_that_leaves_a_fifo_checkpoint_and_exits_is_seen_ended_not_running(
    local: LocalProvider,
) -> None:
    sid = await sandbox(local)
    agent = await local.start_agent(
        sid,
        AgentLaunch(
            start_key="fifo-1-0",
            command=f"echo '{{\"step\": 1}}' > {CHECKPOINT}; sleep 0.3; "
            f"rm {CHECKPOINT}; mkfifo {CHECKPOINT}; exit 0",
            cwd="/workspace",
        ),
    )
    watch = ObserveInput(
        provider="local",
        sandbox_id=sid,
        process_id=agent.process_id,
        checkpoint_path=CHECKPOINT,
        max_checkpoint_bytes=1000,
        wait_seconds=10,
    )
    with unblocked_fifos([host(local, sid)]):
        seen = None
        last_read = None
        # The first looks may report the good checkpoint, and the FIFO may be seen (and
        # reported) while the agent still runs, a moment before it exits.
        for _ in range(4):
            seen = await asyncio.wait_for(observe(local, watch, 10), timeout=CAP)
            last_read = seen.checkpoint or last_read
            if seen.process_state != "running":
                break
            watch = watch.model_copy(
                update={
                    "watch_token": seen.watch_token,
                    "known_digest": seen.checkpoint.digest if seen.checkpoint else None,
                }
            )
    assert seen is not None
    assert (seen.process_state, seen.exit_code) == ("exited", 0)
    assert last_read is not None
    assert last_read.status == "unreadable" and "FIFO" in last_read.detail


async def test_a_folder_as_the_checkpoint_is_refused_and_leaks_no_file_descriptor(
    local: LocalProvider,
) -> None:
    sid = await sandbox(local)
    host(local, sid).mkdir()
    before = len(os.listdir("/proc/self/fd"))
    reads = [await local.read_file(sid, CHECKPOINT, 1000) for _ in range(200)]
    assert {(r.status, r.detail) for r in reads} == {("refused", "it is a folder")}
    assert len(os.listdir("/proc/self/fd")) <= before + 2  # the pool's own, at most


async def test_a_symlink_as_the_checkpoint_is_refused_even_when_it_stays_inside(
    local: LocalProvider,
) -> None:
    sid = await sandbox(local)
    host(local, sid, "/workspace/real.json").write_bytes(b'{"step": 1}')
    host(local, sid).symlink_to("real.json")
    read = await local.read_file(sid, CHECKPOINT, 1000)
    assert (read.status, read.data) == ("refused", None)
    assert "symbolic link" in read.detail


async def test_a_symlinked_folder_on_the_checkpoint_path_is_not_followed(
    local: LocalProvider, tmp_path: Path
) -> None:
    sid = await sandbox(local)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "cp.json").write_text('{"next": "stolen"}')
    host(local, sid, "/workspace/state").symlink_to(outside)
    read = await local.read_file(sid, "/workspace/state/cp.json", 1000)
    assert (read.status, read.data) == ("outside", None)
    inside = host(local, sid, "/workspace/real")
    inside.mkdir()
    (inside / "cp.json").write_text("{}")
    host(local, sid, "/workspace/alias").symlink_to("real")
    read = await local.read_file(sid, "/workspace/alias/cp.json", 1000)
    assert read.status == "refused" and "symbolic link" in read.detail


# ----- writes: the snapshot answer and every other file the worker puts in a sandbox -----


async def test_the_snapshot_answer_is_not_written_through_a_symlinked_folder(
    local: LocalProvider, tmp_path: Path
) -> None:
    sid = await sandbox(local)
    outside = tmp_path / "outside"
    outside.mkdir()
    host(local, sid, "/workspace/.overnight").symlink_to(outside)
    with pytest.raises(ProviderError, match="symbolic link"):
        await local.write_file(sid, "/workspace/.overnight/snapshot.json", b'{"request": 1}')
    assert list(outside.iterdir()) == []


async def test_a_write_goes_to_the_file_not_through_a_symlink_left_at_its_name(
    local: LocalProvider, tmp_path: Path
) -> None:
    sid = await sandbox(local)
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    answer = host(local, sid, "/workspace/.overnight/snapshot.json")
    answer.parent.mkdir(exist_ok=True)
    answer.symlink_to(victim)
    await local.write_file(sid, "/workspace/.overnight/snapshot.json", b"{}")
    assert victim.read_text() == "untouched"
    assert not answer.is_symlink() and answer.read_bytes() == b"{}"


def test_a_folder_swapped_for_a_symlink_while_writing_never_lets_a_write_out(
    tmp_path: Path,
) -> None:
    root = tmp_path / "workspace"
    (root / ".overnight").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = root / ".overnight"
    link = root / ".swap-link"
    aside = root / ".swap-real"
    link.symlink_to(outside)
    stop = threading.Event()

    def swapper() -> None:
        # The agent's side: put a symlink to `outside` where the folder is, and back, as fast
        # as it can (the writer may make the folder anew while it is away: that one goes).
        while not stop.is_set():
            os.rename(folder, aside)
            while True:
                try:
                    os.rename(link, folder)
                    break
                except OSError:
                    shutil.rmtree(folder, ignore_errors=True)
            os.rename(folder, link)
            while True:
                try:
                    os.rename(aside, folder)
                    break
                except OSError:
                    shutil.rmtree(folder, ignore_errors=True)

    writes = refused = 0
    racer = threading.Thread(target=swapper)
    racer.start()
    try:
        # Race for 1.5 s at least, and on until both outcomes were seen (capped): a loaded
        # machine may give the two threads too few turns in 1.5 s to meet.
        least, give_up = time.monotonic() + 1.5, time.monotonic() + CAP
        while time.monotonic() < least or not (writes and refused):
            if time.monotonic() > give_up:
                break
            try:
                write_inside(root, [".overnight", "snapshot.json"], b'{"request": 1}')
                writes += 1
            except (OSError, ValueError):
                refused += 1  # the folder was a link (or away) at that moment: nothing written
    finally:
        stop.set()
        racer.join()
    assert list(outside.iterdir()) == [], "a write went through the symlink"
    assert writes > 0 and refused > 0, (writes, refused)


# ----- inspect: listing and reading stay inside /workspace -----


async def test_inspect_refuses_to_list_through_a_symlink_to_the_root(local: LocalProvider) -> None:
    sid = await sandbox(local)
    host(local, sid, "/workspace/link").symlink_to("/")
    look = LocalForensics(local.engine)
    for path in ("/workspace/link", "/workspace/link/etc", "/workspace/link/root"):
        with pytest.raises(ProviderError, match="inspect stays inside /workspace"):
            await look.list_files(sid, path, 100)
    read = await look.read_file(sid, "/workspace/link/etc/hostname", 1000)
    assert (read.status, read.data) == ("outside", None)
    listing = await look.list_files(sid, "/workspace", 100)
    link = next(e for e in listing.entries if e.path == "/workspace/link")
    assert link.kind == "symlink"  # listed, never entered
    assert all(not e.path.startswith("/workspace/link/") for e in listing.entries)


def test_a_workspace_path_maps_to_its_components_below_the_workspace(tmp_path: Path) -> None:
    ws = WorkspaceMap(tmp_path)
    assert ws.parts("/workspace") == []
    assert ws.parts("/workspace/a/./b/../c.json") == ["a", "c.json"]
