"""The fake Runtime API follows the real API's rules, proven through the real `withruntime` SDK.

A fake that accepts what the real service refuses hides bugs that only show on Runtime, so
each rule of the API reference (contract section 6) is checked here as a client meets it:
create ranges and fields, names, leases, wakes, `:extend`, commands that must fit the lease,
the rate limit, the counters, file watches, process output, stat and `waitFor`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import withruntime
from withruntime._async_products.watch import AsyncWatchHandle

from activities.providers.local.provider import LocalProvider
from fakes.runtime import FakeRuntime
from tests.waits import CAP

Event = dict[str, Any]


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home") as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


@pytest_asyncio.fixture
async def rt(fake: FakeRuntime) -> AsyncIterator[withruntime.AsyncRuntime]:
    client = withruntime.AsyncRuntime(timeout=10, max_retries=1, wait_for_capacity=0)
    try:
        yield client
    finally:
        await client.close()


async def new_sandbox(rt: withruntime.AsyncRuntime, **fields: Any) -> withruntime.AsyncSandbox:
    sandbox: withruntime.AsyncSandbox = await rt.sandboxes.create(
        **({"timeout_seconds": 600} | fields)
    )
    return sandbox


def host(fake: FakeRuntime, sandbox_id: str, path: str = "/workspace") -> Path:
    """Where a sandbox path really is: to change files behind the API's back."""
    engine = fake.api.engine
    assert isinstance(engine, LocalProvider)
    return engine.engine.host_path(sandbox_id, path)


def seconds_until(value: str) -> float:
    return (datetime.fromisoformat(value) - datetime.now(UTC)).total_seconds()


async def pause_behind_its_back(fake: FakeRuntime, sandbox_id: str) -> None:
    await fake.acall(lambda engine: engine.pause(sandbox_id))


async def events_until(
    watch: AsyncWatchHandle, done: Callable[[list[Event]], bool], seconds: float = CAP
) -> list[Event]:
    seen: list[Event] = []
    give_up = time.monotonic() + seconds
    while not done(seen) and time.monotonic() < give_up:
        seen += await watch.get_new_events(wait_ms=500)
    return seen


def has(kind: str, path: str) -> Callable[[list[Event]], bool]:
    return lambda seen: any(e["type"] == kind and e["path"] == path for e in seen)


# --- create ---


async def test_a_lease_shorter_than_a_minute_is_refused(rt: withruntime.AsyncRuntime) -> None:
    with pytest.raises(withruntime.InvalidRequestError) as refused:
        await rt.sandboxes.create(timeout_seconds=30)
    assert refused.value.code == "invalid_request"
    assert "timeoutSeconds" in refused.value.message
    with pytest.raises(withruntime.InvalidRequestError):
        await rt.sandboxes.create(timeout_seconds=3601)


async def test_sizes_out_of_range_are_refused_each_named(rt: withruntime.AsyncRuntime) -> None:
    with pytest.raises(withruntime.InvalidRequestError) as refused:
        await rt.sandboxes.create(vcpu=17, memory_mib=64, disk_mib=1024, on_lease_end="delete")
    assert refused.value.details is not None
    assert refused.value.details["fields"] == ["vcpu", "memoryMiB", "diskMiB", "onLeaseEnd"]


async def test_unknown_create_fields_are_refused_each_named(
    rt: withruntime.AsyncRuntime,
) -> None:
    # The SDK refuses unknown kwargs itself, so this goes through its transport directly.
    with pytest.raises(withruntime.InvalidRequestError) as refused:
        await rt._t.json("POST", "/v1/sandboxes", body={"memoryMb": 512, "colour": "red"})
    assert refused.value.details is not None
    assert refused.value.details["fields"] == ["colour", "memoryMb"]
    assert "colour" in refused.value.message and "memoryMb" in refused.value.message


async def test_a_sandbox_shows_what_it_was_made_with_and_never_its_env(
    rt: withruntime.AsyncRuntime,
) -> None:
    sandbox = await rt.sandboxes.create(
        name="shown",
        labels={"run": "r1"},
        max_total_cost_micros=5000,
        idle_pause_seconds=0,
        env={"TOKEN": "secret-value"},
    )
    info = sandbox.info
    assert info["name"] == "shown" and info["id"] != "shown"
    assert (info["state"], info["labels"], info["timeoutSeconds"]) == (
        "running",
        {"run": "r1"},
        1800,
    )
    assert 1790 < seconds_until(info["endsAt"]) <= 1800
    assert (info["onLeaseEnd"], info["vcpu"], info["memoryMiB"]) == ("pause", 2, 4096)
    assert (info["maxTotalCostMicros"], info["idlePauseSeconds"]) == (5000, 0)
    assert info["stopReason"] is None and info["createdAt"]
    assert "secret-value" not in str(info)


async def test_a_lenient_fake_accepts_what_the_real_api_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeRuntime.local(tmp_path / "home", strict=False) as fake:
        fake.use(monkeypatch, tmp_path / "config")
        rt = withruntime.AsyncRuntime(max_retries=0, wait_for_capacity=0)
        try:
            sandbox = await rt.sandboxes.create(timeout_seconds=5)
            assert sandbox.state == "running"
            fake.rules.check_ranges = True  # one rule on again, while it runs
            with pytest.raises(withruntime.InvalidRequestError):
                await rt.sandboxes.create(timeout_seconds=5)
        finally:
            await rt.close()


# --- names ---


async def test_a_name_is_taken_while_its_sandbox_can_run(rt: withruntime.AsyncRuntime) -> None:
    first = await new_sandbox(rt, name="busy")
    with pytest.raises(withruntime.ConflictError) as taken:
        await new_sandbox(rt, name="busy")
    assert taken.value.code == "name_taken"
    again = await rt.sandboxes.get_or_create("busy", timeout_seconds=600)
    assert (again.id, again.info["reused"]) == (first.id, True)


async def test_a_stopped_sandbox_gives_its_name_up(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    first = await new_sandbox(rt, name="reusable", labels={"k": "v"})
    await first.stop()
    second = await rt.sandboxes.get_or_create("reusable", timeout_seconds=600)

    assert second.id != first.id and second.info["reused"] is False
    assert (second.info["name"], second.state) == ("reusable", "running")
    assert fake.sandbox_named("reusable") == second.id
    listed = [s async for s in await rt.sandboxes.list(name="reusable", include_stopped=True)]
    assert sorted(s.id for s in listed) == sorted([first.id, second.id])
    running = [s async for s in await rt.sandboxes.list(labels={"k": "v"})]
    assert [s.id for s in running] == []  # the second has no labels; the first is stopped


async def test_get_or_create_wakes_a_paused_holder(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    first = await new_sandbox(rt, name="sleepy")
    await first.pause()
    again = await rt.sandboxes.get_or_create("sleepy", timeout_seconds=600)
    assert (again.id, again.state, again.info["reused"]) == (first.id, "running", True)
    assert [sandbox_id for sandbox_id, _ in fake.wakes] == [first.id]


# --- leases and wakes ---


async def test_the_lease_end_pauses_by_default_and_keeps_the_files(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.files.write("/workspace/kept.txt", b"still here")
    fake.end_lease_in(sandbox.id, 0.2)

    await sandbox.wait_for("paused", 5)
    assert sandbox.state == "paused" and fake.wakes == []
    # Reading a file is a guest call: it wakes the sandbox, with a fresh lease.
    assert await sandbox.files.read("/workspace/kept.txt") == b"still here"
    await sandbox.refresh()
    assert sandbox.state == "running" and len(fake.wakes) == 1
    assert 590 < seconds_until(sandbox.info["endsAt"]) <= 600


async def test_wakes_are_told_apart_by_the_key_of_the_request_that_woke(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.pause()
    other = fake.add_key("second-key")["RUNTIME_API_KEY"]
    async with withruntime.AsyncRuntime(api_key=other, timeout=10, max_retries=0) as second:
        theirs = await second.sandboxes.get(sandbox.id)
        assert await theirs.files.exists("/workspace") is True  # a guest call: it wakes
    assert [sid for sid, _ in fake.wakes] == [sandbox.id]
    assert [sid for sid, _ in fake.wakes_by("second-key")] == [sandbox.id]
    assert fake.wakes_by(fake.api_key) == []


async def test_a_lease_made_to_stop_ends_the_sandbox_and_its_disk(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt, on_lease_end="stop")
    await sandbox.files.write("/workspace/lost.txt", b"gone")
    fake.end_lease_in(sandbox.id, 0.2)

    await sandbox.wait_for("stopped", 5)
    assert (sandbox.state, sandbox.info["stopReason"]) == ("stopped", "lease_expired")
    with pytest.raises(withruntime.ConflictError) as refused:
        await sandbox.files.read("/workspace/lost.txt")
    assert refused.value.code == "sandbox_stopped"


async def test_a_paused_sandbox_without_auto_wake_refuses_guest_calls(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt, auto_wake=False)
    await sandbox.pause()
    with pytest.raises(withruntime.ConflictError) as refused:
        await sandbox.exec("true")
    assert refused.value.code == "sandbox_paused"
    await sandbox.wake()
    assert sandbox.state == "running"
    assert (await sandbox.exec("echo awake")).stdout == "awake\n"


async def test_wake_gives_a_fresh_lease_and_refuses_a_running_sandbox(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.wake()  # running: the SDK tolerates the 409 not_paused
    assert fake.request_count(sandbox.id, route="wake", status=409) == 1
    with pytest.raises(withruntime.ConflictError) as refused:
        await sandbox.wake(timeout_seconds=900)  # asking for a new lease is not tolerated
    assert refused.value.code == "not_paused"

    await sandbox.pause()
    await sandbox.wake(timeout_seconds=900)
    assert sandbox.state == "running"
    assert 890 < seconds_until(sandbox.info["endsAt"]) <= 900
    with pytest.raises(withruntime.InvalidRequestError):
        await sandbox.pause()
        await sandbox.wake(timeout_seconds=30)


async def test_extend_refuses_more_than_an_hour_ahead(rt: withruntime.AsyncRuntime) -> None:
    sandbox = await new_sandbox(rt, timeout_seconds=3000)
    with pytest.raises(withruntime.InvalidRequestError) as refused:
        await sandbox.extend(700)
    assert "an hour" in refused.value.message
    await sandbox.extend(500)
    assert 3490 < seconds_until(sandbox.info["endsAt"]) <= 3500


async def test_a_command_longer_than_the_lease_is_refused(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    fake.end_lease_in(sandbox.id, 30)
    with pytest.raises(withruntime.ConflictError) as refused:
        await sandbox.exec("true", timeout_ms=45_000)
    assert refused.value.code == "lease_too_short"
    # A streamed exec defaults to a day: it never fits a lease.
    with pytest.raises(withruntime.ConflictError):
        await sandbox.exec("true", on_stdout=lambda _: None)
    # Without a timeout, the default is what the lease has left.
    assert (await sandbox.exec("echo fits")).stdout == "fits\n"
    assert (await sandbox.exec("true", timeout_ms=20_000)).exit_code == 0


async def test_wait_for_holds_until_the_state_is_reached(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    began = time.monotonic()
    waiting = asyncio.create_task(sandbox.wait_for("paused", 30))
    await asyncio.sleep(0.3)
    await pause_behind_its_back(fake, sandbox.id)
    await waiting
    # Answered on the pause (0.3 s in), not at the end of its 30 s.
    assert sandbox.state == "paused" and time.monotonic() - began < 10
    began = time.monotonic()
    await sandbox.wait_for("stopped", 1)  # never reached: held for the time asked, no more
    # Its 1 s, not the 60 s a wait is held when no time is asked.
    assert sandbox.state == "paused" and 0.9 < time.monotonic() - began < 10


# --- rate limit ---


async def test_over_the_rate_limit_answers_429_with_retry_after(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.rules.burst, fake.rules.rate_per_second, fake.rules.max_queue_seconds = 3, 10.0, 0.05
    sandbox = await new_sandbox(rt)

    got = await asyncio.gather(*(rt.sandboxes.get(sandbox.id) for _ in range(8)))

    assert {s.id for s in got} == {sandbox.id}  # the SDK waited the refusals out
    refused = [s for s in fake.served() if s.status == 429]
    assert refused and all(float(s.headers["retry-after"]) > 0 for s in refused)
    fake.rules.rate_per_second = 0.5
    await asyncio.sleep(0)
    with pytest.raises(withruntime.RateLimitError) as limited:
        for _ in range(3):
            await rt._t.json("GET", f"/v1/sandboxes/{sandbox.id}", deadline=time.monotonic() + 1)
    assert limited.value.code == "rate_limited" and limited.value.retry_after_ms


async def test_a_request_over_the_limit_waits_its_turn_first(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.rules.burst, fake.rules.rate_per_second, fake.rules.max_queue_seconds = 2, 20.0, 3.0
    sandbox = await new_sandbox(rt)
    began = time.monotonic()
    await asyncio.gather(*(sandbox.refresh() for _ in range(6)))
    assert fake.request_count(status=429) == 0
    assert time.monotonic() - began > 0.15  # 5 requests past the burst at 20 a second


async def test_held_streams_count_toward_requests_served_at_once(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    watches = [await sandbox.files.watch("/workspace") for _ in range(2)]
    fake.rules.max_in_flight, fake.rules.max_queue_seconds = 2, 0.1

    async def read(watch: AsyncWatchHandle) -> list[Event]:
        return [event async for event in watch.events()]

    readers = [asyncio.create_task(read(watch)) for watch in watches]
    while sum(s.route == "watch_events" and not s.done for s in fake.served()) < 2:
        await asyncio.sleep(0.02)
    with pytest.raises(withruntime.RateLimitError):
        await rt._t.json("GET", f"/v1/sandboxes/{sandbox.id}", deadline=time.monotonic() + 0.8)

    await pause_behind_its_back(fake, sandbox.id)  # the streams end: their slots are free
    await asyncio.gather(*readers)
    assert [watch.exit_reason for watch in watches] == ["paused", "paused"]
    assert (await rt.sandboxes.get(sandbox.id)).state == "paused"


async def test_a_stream_its_reader_left_gives_its_slot_back_at_once(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    watch = await sandbox.files.watch("/workspace")
    stream = watch.events()
    reading = asyncio.ensure_future(anext(stream))
    while not any(s.route == "watch_events" for s in fake.served()):
        await asyncio.sleep(0.02)
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    await stream.aclose()  # type: ignore[attr-defined]  # an async generator

    # A cap short of the stream's time limit (110 s): a held slot is still told apart.
    give_up = time.monotonic() + min(CAP, fake.rules.stream_seconds / 2)
    while not all(s.done for s in fake.served()) and time.monotonic() < give_up:
        await asyncio.sleep(0.02)
    assert all(s.done for s in fake.served())  # not held until the 110 s time limit


# --- counting ---


async def test_requests_and_bytes_are_counted_by_sandbox_and_route(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    other = await new_sandbox(rt)
    await sandbox.files.write("/workspace/five-k.bin", b"x" * 5000)
    for _ in range(2):
        await sandbox.files.read("/workspace/five-k.bin")
    await other.refresh()

    assert fake.request_count(sandbox.id, route="read") == 2
    assert fake.bytes_sent(route="read") == 10_000
    assert fake.bytes_sent(route="read", sandbox_id=other.id) == 0
    assert fake.counts_by_route(sandbox.id) == {"write": 1, "read": 2}
    assert fake.counts_by_route(other.id) == {"get": 1}
    assert fake.request_count(route="create") == 2


# --- file watches ---


async def test_a_watch_reports_create_write_rename_and_remove(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    watch = await sandbox.files.watch("/workspace", recursive=True)
    folder = host(fake, sandbox.id)
    assert watch.cursor == 0

    (folder / "notes.txt").write_text("one")
    seen = await events_until(watch, has("create", "/workspace/notes.txt"))
    with open(folder / "notes.txt", "a") as notes:
        notes.write(" two")
    seen += await events_until(watch, has("write", "/workspace/notes.txt"))
    (folder / "cp.json.tmp").write_text("{}")
    seen += await events_until(watch, has("create", "/workspace/cp.json.tmp"))
    os.replace(folder / "cp.json.tmp", folder / "cp.json")
    seen += await events_until(watch, has("rename", "/workspace/cp.json"))
    (folder / "notes.txt").unlink()
    seen += await events_until(watch, has("remove", "/workspace/notes.txt"))

    renamed = next(e for e in seen if e["type"] == "rename")
    assert renamed["oldPath"] == "/workspace/cp.json.tmp"
    assert [e["type"] for e in seen] == ["create", "write", "create", "rename", "remove"]
    assert watch.cursor == 5


async def test_an_atomic_replace_is_reported_at_its_target(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.files.write("/workspace/checkpoint.json", b"{}")
    watch = await sandbox.files.watch("/workspace")
    await sandbox.files.write("/workspace/checkpoint.json", b'{"step": 2}')  # tmp + replace
    seen = await events_until(
        watch, lambda s: any(e["path"] == "/workspace/checkpoint.json" for e in s)
    )
    assert any(e["path"] == "/workspace/checkpoint.json" for e in seen)


async def test_a_watch_that_is_not_recursive_sees_only_direct_entries(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    (host(fake, sandbox.id) / "sub").mkdir()
    watch = await sandbox.files.watch("/workspace", exclude=["*.log"])
    (host(fake, sandbox.id) / "sub" / "deep.txt").write_text("unseen")
    (host(fake, sandbox.id) / "noise.log").write_text("excluded")
    (host(fake, sandbox.id) / "top.txt").write_text("seen")
    seen = await events_until(watch, has("create", "/workspace/top.txt"))
    await asyncio.sleep(0.2)
    seen += await watch.get_new_events()
    assert [(e["type"], e["path"]) for e in seen] == [("create", "/workspace/top.txt")]


async def test_at_most_four_watches_run_in_a_sandbox(rt: withruntime.AsyncRuntime) -> None:
    sandbox = await new_sandbox(rt)
    watches = [await sandbox.files.watch("/workspace") for _ in range(4)]
    with pytest.raises(withruntime.ConflictError) as refused:
        await sandbox.files.watch("/workspace")
    assert refused.value.code == "too_many_watches"
    assert len(await sandbox.files.watches.list()) == 4
    assert await watches[0].stop() is True
    assert [event async for event in watches[0].events()] == []
    assert watches[0].exit_reason == "stopped"
    await sandbox.files.watch("/workspace")


async def test_the_watch_stream_ends_with_paused_when_the_sandbox_pauses(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    watch = await sandbox.files.watch("/workspace")
    seen: list[Event] = []

    async def read() -> None:
        async for event in watch.events():
            seen.append(event)

    reader = asyncio.create_task(read())
    (host(fake, sandbox.id) / "before-pause.txt").write_text("x")
    while not seen:
        await asyncio.sleep(0.02)
    await sandbox.pause()
    await asyncio.wait_for(reader, 5)

    assert watch.exit_reason == "paused" and fake.wakes == []
    assert [e["path"] for e in seen] == ["/workspace/before-pause.txt"]


async def test_reading_a_watch_never_wakes_a_paused_sandbox(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    watch = await sandbox.files.watch("/workspace")
    (host(fake, sandbox.id) / "first.txt").write_text("1")
    await events_until(watch, has("create", "/workspace/first.txt"))
    await sandbox.pause()

    assert [event async for event in watch.events()] == []
    assert watch.exit_reason == "paused"
    assert await watch.get_new_events(wait_ms=200) == []
    assert len(await sandbox.files.watches.list()) == 1
    assert (await rt.sandboxes.get(sandbox.id)).state == "paused" and fake.wakes == []

    await sandbox.wake()
    (host(fake, sandbox.id) / "second.txt").write_text("2")
    seen = await events_until(watch, has("create", "/workspace/second.txt"))
    assert [e["path"] for e in seen] == ["/workspace/second.txt"]  # on from the cursor


async def test_the_watch_stream_continues_after_the_server_time_limit(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.rules.stream_seconds = 0.3
    sandbox = await new_sandbox(rt)
    watch = await sandbox.files.watch("/workspace")
    stream = watch.events()
    later = asyncio.get_running_loop().call_later(
        0.8, (host(fake, sandbox.id) / "late.txt").write_text, "x"
    )
    try:
        event = await asyncio.wait_for(anext(stream), 5)
    finally:
        later.cancel()
        await stream.aclose()  # type: ignore[attr-defined]  # an async generator
    assert event == {"type": "create", "path": "/workspace/late.txt"}
    assert fake.request_count(route="watch_events") >= 2  # ended with continue, followed again


# --- process output ---


async def test_process_output_is_followed_with_offsets_to_its_exit(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.rules.stream_seconds = 0.3  # the follow ends with continue; the SDK follows again
    sandbox = await new_sandbox(rt)
    # The rest of its output waits until its first line was followed and the follow taken up
    # again (a sleep did, and a loaded machine's late first follow saw both lines at once).
    process = await sandbox.spawn(
        "printf 'a\\n'; until [ -f /workspace/go ]; do sleep 0.05; done; printf 'bc\\n'; exit 3"
    )

    async def go_when_followed_again(seen_at: int) -> None:
        give_up = time.monotonic() + CAP
        while fake.request_count(route="output") <= seen_at and time.monotonic() < give_up:
            await asyncio.sleep(0.05)
        await sandbox.files.write("/workspace/go", b"")

    events = []
    going: asyncio.Task[None] | None = None
    async for event in process.output():
        events.append(event)
        if going is None and event["type"] == "stdout":
            going = asyncio.create_task(go_when_followed_again(fake.request_count(route="output")))
    assert going is not None
    await going

    output = [(e["type"], e["offset"], e["data"]) for e in events if e["type"] == "stdout"]
    assert output == [("stdout", 0, "a\n"), ("stdout", 2, "bc\n")]
    assert events[-1] == {"type": "exit", "exitCode": 3, "state": "exited", "timedOut": False}
    assert fake.request_count(route="output") >= 2


async def test_process_output_long_polls_as_json(rt: withruntime.AsyncRuntime) -> None:
    sandbox = await new_sandbox(rt)
    process = await sandbox.spawn("sleep 0.3; printf 'late\\n'")
    path = f"/v1/sandboxes/{sandbox.id}/processes/{process.id}/output"

    first = await rt._t.json("GET", path, query={"cursor": 0, "waitMs": 5000})
    assert first["events"][0] == {"type": "stdout", "offset": 0, "data": "late\n"}
    assert first["nextCursor"] == 5
    later = await rt._t.json("GET", path, query={"cursor": 5, "waitMs": 5000})
    assert later["events"][-1]["type"] == "exit" and later["state"] == "exited"
    assert later["nextCursor"] == 5


async def test_only_the_last_of_a_process_output_is_kept(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.rules.output_keep_bytes = 100
    sandbox = await new_sandbox(rt)
    process = await sandbox.spawn("head -c 300 /dev/zero | tr '\\0' x")
    result = await process.wait()
    assert result.stdout == "x" * 100 and result.stdout_truncated
    assert result.exit_code == 0


# --- files ---


async def test_stat_answers_type_size_mode_and_a_precise_time(
    rt: withruntime.AsyncRuntime,
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.files.write("/workspace/tool.sh", b"#!/bin/sh\n", mode=0o755)

    found = await sandbox.files.stat("/workspace/tool.sh")
    assert (found["exists"], found["type"], found["size"], found["mode"]) == (
        True,
        "file",
        10,
        "755",
    )
    assert abs(seconds_until(found["modifiedAt"])) < 60 and "." in found["modifiedAt"]
    assert (await sandbox.files.stat("/workspace"))["type"] == "directory"
    assert await sandbox.files.stat("/workspace/absent") == {"exists": False}
    with pytest.raises(withruntime.PermissionDeniedError):
        await sandbox.files.stat("/etc/passwd")
    with pytest.raises(withruntime.ConflictError) as folder:
        await sandbox.files.read("/workspace")
    assert folder.value.code == "is_a_directory"


async def test_a_read_sends_its_length_and_sha256(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.files.write("/workspace/a.txt", b"abc")
    assert await sandbox.files.read("/workspace/a.txt") == b"abc"
    read = next(s for s in fake.served() if s.route == "read")
    assert read.headers["x-content-length"] == "3"
    sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert read.headers["x-content-sha256"] == sha


async def test_a_large_file_is_streamed_with_its_length(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    data = bytes(range(256)) * 9000  # 2.3 MB: over the 1 MiB read whole
    (host(fake, sandbox.id) / "big.bin").write_bytes(data)
    assert await sandbox.files.read("/workspace/big.bin") == data
    read = next(s for s in fake.served() if s.route == "read")
    assert read.headers["x-content-length"] == str(len(data))
    assert "x-content-sha256" not in read.headers and read.bytes_sent == len(data)


async def test_a_large_write_goes_up_in_parts_and_wakes_a_paused_sandbox(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.pause()
    data = bytes(range(256)) * 9000  # 2.3 MB: begin, three parts, commit
    await sandbox.files.write("/workspace/big.bin", data, mode=0o600)
    assert (host(fake, sandbox.id) / "big.bin").read_bytes() == data
    assert (await sandbox.files.stat("/workspace/big.bin"))["mode"] == "600"
    assert fake.counts_by_route(sandbox.id)["upload_part"] == 3
    assert [sandbox_id for sandbox_id, _ in fake.wakes] == [sandbox.id]


async def test_a_watch_ends_at_its_timeout_and_when_its_sandbox_stops(
    rt: withruntime.AsyncRuntime,
) -> None:
    sandbox = await new_sandbox(rt)
    short = await sandbox.files.watch("/workspace", timeout_ms=300)
    assert [event async for event in short.events()] == []
    assert short.exit_reason == "timeout"

    watch = await sandbox.files.watch("/workspace")
    # Read until the watch ends. Only the stop can end it (its own timeout is an hour away), and
    # as "stopped": its files do not vanish under it. The 60 s cap is for a watch that never ends.
    reader = asyncio.create_task(events_until(watch, lambda _: watch.exit_reason is not None, 60))
    await asyncio.sleep(0.2)
    await sandbox.stop()
    assert await reader == []
    assert watch.exit_reason == "stopped"


async def test_a_watch_ends_root_removed_when_its_folder_goes_while_its_sandbox_runs(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    (host(fake, sandbox.id) / "sub").mkdir()
    watch = await sandbox.files.watch("/workspace/sub")
    (host(fake, sandbox.id) / "sub").rmdir()
    await events_until(watch, lambda _: watch.exit_reason is not None, 60)
    assert watch.exit_reason == "root-removed"
    assert (await rt.sandboxes.get(sandbox.id)).info["state"] == "running"


async def test_retention_keeps_a_paused_sandbox_for_its_days_then_deletes_it(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    for days in (0, 366, True, 2.5, "3"):
        with pytest.raises(withruntime.InvalidRequestError) as refused:
            await sandbox.set_retention(days)  # type: ignore[arg-type]
        assert "days" in refused.value.message
    with pytest.raises(withruntime.InvalidRequestError) as unknown:
        await sandbox._lifecycle("retention", False, {"days": 3, "hours": 1})
    assert "hours" in unknown.value.message
    answered = await sandbox.set_retention(3)  # on a running one too: the sandbox answers
    assert answered.info["id"] == sandbox.id and answered.info["state"] == "running"
    assert fake.retention_days(sandbox.id) == 3
    assert fake.counts_by_route(sandbox.id)["retention"] == 7
    # Running, its retention past: not deleted (it keeps a *paused* sandbox).
    fake.end_retention(sandbox.id)
    assert (await rt.sandboxes.get(sandbox.id)).info["state"] == "running"
    await sandbox.pause()
    await sandbox.set_retention(30)
    assert (await rt.sandboxes.get(sandbox.id)).info["state"] == "paused"
    # Thirty days later (let pass): Runtime has deleted it.
    fake.end_retention(sandbox.id)
    with pytest.raises(withruntime.NotFoundError):
        await rt.sandboxes.get(sandbox.id)
    stopped = await new_sandbox(rt)
    await stopped.stop()
    with pytest.raises(withruntime.ConflictError) as conflict:
        await stopped.set_retention(3)
    assert conflict.value.code == "sandbox_stopped"
