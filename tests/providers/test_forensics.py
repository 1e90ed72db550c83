"""Looking into a sandbox, the same on every provider: its agents, their output by cursor,
the tail of it, and its files (see activities/providers/forensics.py)."""

from __future__ import annotations

import asyncio
import time

from activities.providers.forensics import SandboxForensics
from activities.providers.registry import forensics_for
from overnight.core.output_tail import cut_tail
from tests.providers.conftest import Harness
from tests.providers.test_behaviour import new_sandbox, start, wait_for_process
from tests.waits import CAP

TALKER = "for i in $(seq 1 60); do echo line $i; done; echo oops >&2; exit 3"


def forensics(h: Harness) -> SandboxForensics:
    found = forensics_for(h.provider)
    assert found is not None
    return found


async def test_agents_are_listed_in_start_order_with_their_fresh_start(provider: Harness) -> None:
    box = await new_sandbox(provider)
    sid = box.sandbox_id
    first = await start(provider, sid, "echo first", key="run-a-1-0")
    await wait_for_process(provider, sid, first.process_id)
    second = await start(provider, sid, "echo second; sleep 30", key="run-a-1-4")
    agents = await forensics(provider).agents(sid)
    assert [(a.process_id, a.fresh_start) for a in agents] == [
        (first.process_id, 0),
        (second.process_id, 4),
    ]
    assert [a.state for a in agents] == ["exited", "running"]
    assert agents[0].exit_code == 0


async def test_output_is_read_by_cursor_in_order_until_the_agent_ended(provider: Harness) -> None:
    box = await new_sandbox(provider)
    process = await start(provider, box.sandbox_id, TALKER, key="run-b-1-0")
    look = forensics(provider)
    data, cursor = b"", 0
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        chunk = await look.read_output(box.sandbox_id, process.process_id, cursor, wait_seconds=1)
        assert chunk.next_cursor == cursor + len(chunk.data)
        data, cursor = data + chunk.data, chunk.next_cursor
        if chunk.state != "running":
            break
    lines = data.decode().splitlines()
    assert lines == [f"line {n}" for n in range(1, 61)] + ["oops"]
    assert (chunk.state, chunk.exit_code) == ("exited", 3)
    # Read again from the end: nothing more, and the end is said at once.
    again = await look.read_output(box.sandbox_id, process.process_id, cursor, wait_seconds=5)
    assert (again.data, again.state) == (b"", "exited")


async def test_a_waiting_read_answers_as_soon_as_there_is_output(provider: Harness) -> None:
    box = await new_sandbox(provider)
    process = await start(provider, box.sandbox_id, "sleep 1; echo late; sleep 300", key="r-c-1-0")
    began = time.monotonic()
    chunk = await forensics(provider).read_output(
        box.sandbox_id, process.process_id, 0, wait_seconds=60
    )
    took = time.monotonic() - began
    # It waited for the output (at once it would have read nothing), and answered when it came,
    # a second in, not at the end of its 60 s wait.
    assert chunk.data == b"late\n" and chunk.state == "running"
    assert took < 20


async def test_the_tail_is_the_end_of_the_output_and_says_where_it_starts(
    provider: Harness,
) -> None:
    box = await new_sandbox(provider)
    process = await start(provider, box.sandbox_id, TALKER, key="run-d-1-0")
    await wait_for_process(provider, box.sandbox_id, process.process_id)
    look = forensics(provider)
    tail = await look.output_tail(box.sandbox_id, process.process_id, 40)
    assert tail.data.endswith(b"line 60\noops\n") and len(tail.data) == 40
    assert tail.next_cursor - len(tail.data) > 0
    words = cut_tail(tail.data, [], from_start=False)
    assert words.text.splitlines()[-2:] == ["line 60", "oops"]
    whole = await look.output_tail(box.sandbox_id, process.process_id, 100_000)
    assert whole.next_cursor == len(whole.data) and whole.data.startswith(b"line 1\n")


async def test_files_are_listed_without_entering_git_and_read_back(provider: Harness) -> None:
    box = await new_sandbox(provider)
    sid = box.sandbox_id
    await provider.provider.write_file(sid, "/workspace/app/src/main.py", b"print('hi')\n")
    await provider.provider.write_file(sid, "/workspace/app/.git/HEAD", b"ref: main\n")
    await provider.provider.write_file(sid, "/workspace/checkpoint.json", b'{"step": 2}')
    look = forensics(provider)
    listing = await look.list_files(sid, "/workspace", 100)
    paths = {e.path: e for e in listing.entries}
    assert paths["/workspace/app/src/main.py"].size == 12
    assert paths["/workspace/app/src/main.py"].kind == "file"
    assert paths["/workspace/app/.git"].kind == "directory"
    assert "/workspace/app/.git/HEAD" not in paths
    assert paths["/workspace/checkpoint.json"].modified_at is not None
    assert listing.more == 0
    few = await look.list_files(sid, "/workspace/app", 2)
    assert (len(few.entries), few.more) == (2, 1)  # .git, src, src/main.py
    read = await look.read_file(sid, "/workspace/checkpoint.json", 1000)
    assert (read.status, read.data) == ("ok", b'{"step": 2}')


async def test_a_local_sandbox_is_read_where_it_is_paused_and_gone_once_stopped(
    provider: Harness,
) -> None:
    if provider.name != "local":
        return  # Runtime: reading wakes a paused sandbox; the CLI wakes and re-pauses it
    box = await new_sandbox(provider)
    process = await start(provider, box.sandbox_id, "echo before; sleep 60", key="run-e-1-0")
    look = forensics(provider)
    # Paused once it wrote (a new sandbox's first process may take seconds to start).
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        if (await look.read_output(box.sandbox_id, process.process_id, 0)).data:
            break
        await asyncio.sleep(0.05)
    await provider.provider.pause(box.sandbox_id)
    assert not look.wakes_on_read
    chunk = await look.read_output(box.sandbox_id, process.process_id, 0)
    assert chunk.data == b"before\n"
    assert (await provider.provider.sandbox(box.sandbox_id)).state == "paused"
    await provider.provider.stop(box.sandbox_id)
    # Stopped, it is gone as on Runtime: its agent is still told of, its files and output not.
    listing = await look.list_files(box.sandbox_id, "/workspace", 10)
    assert listing.entries == []
    assert [a.process_id for a in await look.agents(box.sandbox_id)] == [process.process_id]
    tail = await look.output_tail(box.sandbox_id, process.process_id, 100)
    assert (tail.data, tail.state) == (b"", "killed")
