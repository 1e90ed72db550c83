"""A stopped sandbox is gone, as on Runtime; a paused one keeps everything. Run against each
provider (the `runtime` one through the fake Runtime API, whose engine is the local one): the
engine's folder is looked at behind the provider's back."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from activities.providers.local.disk import KEPT_AGENT, KEPT_TOP
from overnight.core.constants import LABEL_KEEP_UNTIL, LABEL_RUN
from tests.providers.conftest import Harness
from tests.providers.test_behaviour import new_sandbox, start, wait_for_process
from tests.waits import CAP

# Fills the workspace, $HOME and /tmp, prints, and waits to be stopped.
BUSY = (
    "mkdir -p /workspace/app/deep/er && head -c 3000000 /dev/zero > /workspace/app/deep/er/blob"
    " && echo cache > $HOME/.cache && echo scratch > /tmp/scratch"
    " && for i in $(seq 50); do echo line $i; done; echo last words; sleep 60"
)


def tree(folder: Path) -> set[str]:
    """Every path under `folder`, relative, links not followed."""
    found = set()
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            found.add(str((Path(root) / name).relative_to(folder)))
    return found


async def _busy_agent(h: Harness) -> tuple[str, str]:
    sid = (await new_sandbox(h)).sandbox_id
    agent = await start(h, sid, BUSY, key="gone-1-0")
    # Its whole size, not only the file (the shell makes it before head writes it), under a
    # time cap, not a count of looks: a loaded machine may take seconds to start the agent.
    blob = h.host_path(sid, "/workspace/app/deep/er/blob")
    give_up = time.monotonic() + CAP
    while not (blob.exists() and blob.stat().st_size == 3_000_000) and time.monotonic() < give_up:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    return sid, agent.process_id


async def test_a_stopped_sandbox_keeps_only_its_record_and_its_agents_records(
    provider: Harness,
) -> None:
    h = provider
    sid, process_id = await _busy_agent(h)
    folder = h.engine.folder(sid)
    assert (folder / "workspace" / "app" / "deep" / "er" / "blob").stat().st_size == 3_000_000

    stopped = await h.provider.stop(sid)

    assert stopped.state == "stopped"
    # Only the tombstone: state, lock, and per agent its records (not its output).
    left = tree(folder)
    assert {p.split("/")[0] for p in left} <= KEPT_TOP
    agent_files = {p.split("/", 2)[2] for p in left if p.count("/") == 2}
    assert agent_files <= KEPT_AGENT and "exit.json" in agent_files
    assert not (folder / "workspace").exists() and not (folder / "home").exists()
    assert sum((folder / p).stat().st_size for p in left if (folder / p).is_file()) < 20_000
    meta = h.engine.get(sid)
    assert meta.freed_at is not None and (meta.freed_bytes or 0) >= 3_000_000
    # Still known as stopped (a Runtime sandbox's record outlives its disk), and its agent's
    # end is still told; nothing is left in the trash.
    assert (await h.provider.sandbox(sid)).state == "stopped"
    listed = await h.provider.list({LABEL_RUN: "r"}, include_stopped=True)
    assert [s.sandbox_id for s in listed] == [sid]
    assert (await wait_for_process(h, sid, process_id)).state == "killed"
    assert list(h.engine.trash_dir.iterdir()) == []
    assert (await h.provider.stop(sid)).state == "stopped"  # stopping again is fine


async def test_a_paused_sandbox_keeps_its_files(provider: Harness) -> None:
    h = provider
    sid, _ = await _busy_agent(h)

    assert (await h.provider.pause(sid)).state == "paused"

    folder = h.engine.folder(sid)
    assert (folder / "workspace" / "app" / "deep" / "er" / "blob").stat().st_size == 3_000_000
    assert h.engine.get(sid).freed_at is None


async def test_deleting_a_sandbox_never_follows_a_link_out_of_it(
    provider: Harness, tmp_path: Path
) -> None:
    h = provider
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "folder" / "keep.txt").write_text("precious")
    (outside / "file.txt").write_text("precious too")
    outside.chmod(0o755)
    sid = (await new_sandbox(h)).sandbox_id
    # Links the agent could plant, into folders and files outside, at every depth.
    workspace = h.host_path(sid, "/workspace")
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "to-folder").symlink_to(outside / "folder")
    (workspace / "a" / "b" / "to-file").symlink_to(outside / "file.txt")
    (workspace / "a" / "to-top").symlink_to(outside)
    (h.engine.folder(sid) / "home" / "escape").symlink_to(outside)

    await h.provider.stop(sid)

    assert not workspace.exists()
    assert (outside / "folder" / "keep.txt").read_text() == "precious"
    assert (outside / "file.txt").read_text() == "precious too"


async def test_a_sandbox_kept_for_a_look_is_labelled_without_being_woken(
    provider: Harness,
) -> None:
    h = provider
    sid, _ = await _busy_agent(h)
    await h.provider.pause(sid)

    labelled = await h.provider.set_labels(sid, {LABEL_KEEP_UNTIL: "20261204T031500Z"})

    assert labelled.state == "paused"
    assert labelled.labels[LABEL_KEEP_UNTIL] == "20261204T031500Z"
    assert labelled.labels[LABEL_RUN] == "r"  # the others stay
    assert h.engine.get(sid).state == "paused"
    listed = await h.provider.list({LABEL_KEEP_UNTIL: "20261204T031500Z"}, include_stopped=False)
    assert [s.sandbox_id for s in listed] == [sid]
