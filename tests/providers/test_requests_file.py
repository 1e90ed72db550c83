"""The agent kit's requests file beside the checkpoint (`.overnight-requests.json`), on both
providers: a write to it is a touch said apart from the checkpoint's, by the local watch (the
kernel's and the timer's) and the Runtime watch (a held stream and the account's events);
`observe` hands over what it asks although the agent overwrote its checkpoint its own way; it
is agent bytes, read with the checkpoint's rules (no link, no FIFO, a size cap, bounded JSON,
secrets redacted), never raising; and on Runtime it costs a run that never writes it one
`stat` per new watch and no download.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from activities.models import ObserveInput, RequestsRead
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch, SandboxRequest, Sighting, WatchRequest
from activities.providers.runtime.provider import RuntimeProvider
from activities.providers.runtime.settings import WatchSettings
from activities.providers.runtime.watch_stream import exit_marker_path
from activities.sandbox import requests_file
from activities.sandbox.observe import observe
from fakes.runtime import FakeRuntime, Rules
from overnight.core.agent_requests import MAX_REQUESTS_BYTES, requests_path
from tests.waits import CAP

CHECKPOINT = "/workspace/checkpoint.json"
REQUESTS = requests_path(CHECKPOINT)
USAGE = {"usage": {"stream": "a1-p7-1", "usd": 1.5, "model": "m"}}
# What an agent on the kit does, by hand: its requests file, then its checkpoint its own way
# (a rename of a file holding no key of the kit's), then works on.
KIT_THEN_OWN_SAVE = (
    f"printf '%s' '{json.dumps(USAGE)}' > {REQUESTS}.tmp && mv -f {REQUESTS}.tmp {REQUESTS}; "
    f"printf '%s' '{{\"step\": 1}}' > {CHECKPOINT}.tmp && mv -f {CHECKPOINT}.tmp {CHECKPOINT}; "
    "sleep 600"
)


def look_input(
    provider: str,
    sandbox_id: str,
    process_id: str,
    token: str | None,
    known_requests_digest: str | None = None,
) -> ObserveInput:
    """One observe as the activity runs it for a run that reads the requests file."""
    return ObserveInput.model_validate(
        {
            "provider": provider,
            "sandbox_id": sandbox_id,
            "process_id": process_id,
            "checkpoint_path": CHECKPOINT,
            "max_checkpoint_bytes": 65536,
            "wait_seconds": 1,
            "watch_token": token,
            "report_every_seconds": 0,
            "requests_path": REQUESTS,
            "known_requests_digest": known_requests_digest,
        }
    )


# ---- local -------------------------------------------------------------------------------


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    try:
        yield provider
    finally:
        for info in await provider.list({}, include_stopped=False):
            await provider.stop(info.sandbox_id)


async def local_agent(provider: LocalProvider, command: str = "sleep 600") -> tuple[str, str]:
    request = SandboxRequest(
        name=f"rq-{uuid.uuid4().hex[:10]}", labels={}, timeout_seconds=600, vcpu=1, memory_mib=512
    )
    info, _ = await provider.get_or_create(request)
    launch = AgentLaunch(f"{info.sandbox_id}-1-0", command, "/workspace")
    agent = await provider.start_agent(info.sandbox_id, launch)
    return info.sandbox_id, agent.process_id


def write_whole(provider: LocalProvider, sandbox_id: str, path: str, data: bytes) -> None:
    """As an agent writes it: a temporary file renamed into the folder."""
    target = provider.engine.host_path(sandbox_id, path)
    temp = target.with_name(target.name + ".tmp")
    temp.write_bytes(data)
    os.replace(temp, target)


@pytest.mark.parametrize("kernel", [True, False], ids=["inotify", "timer"])
async def test_a_local_write_to_the_requests_file_is_a_touch_said_apart(
    tmp_path: Path, kernel: bool
) -> None:
    provider = LocalProvider(LocalEngine(tmp_path / "home"), kernel_watch=kernel)
    try:
        sid, pid = await local_agent(provider)

        async def watch(token: str | None, report_touch: bool = True, wait: float = 10) -> Sighting:
            return await provider.watch(
                WatchRequest(
                    sid,
                    pid,
                    CHECKPOINT,
                    token=token,
                    wait_seconds=wait,
                    report_touch=report_touch,
                    requests_path=REQUESTS,
                )
            )

        first = await watch(None, wait=1)
        # Woken by the write, not at its window's end: 20 s of a 60 s window tells the two apart
        # under any load (5 s of 10 did not).
        waiting = asyncio.create_task(watch(first.token, wait=60))
        await asyncio.sleep(0.6)
        assert not waiting.done()
        write_whole(provider, sid, REQUESTS, json.dumps(USAGE).encode())
        asked = await asyncio.wait_for(waiting, 20)
        assert (asked.requests_touched, asked.checkpoint_touched) == (True, False)

        write_whole(provider, sid, CHECKPOINT, b'{"step": 1}')
        wrote = await watch(asked.token)
        assert (wrote.requests_touched, wrote.checkpoint_touched) == (False, True)

        # Written while the caller holds other news (no touch ends the wait): still said.
        write_whole(provider, sid, REQUESTS, b"{}")
        held = await watch(wrote.token, report_touch=False, wait=0.8)
        assert (held.requests_touched, held.checkpoint_touched) == (True, False)
    finally:
        for info in await provider.list({}, include_stopped=False):
            await provider.stop(info.sandbox_id)


async def test_observe_hands_over_the_requests_of_an_agent_that_overwrote_its_checkpoint(
    local: LocalProvider,
) -> None:
    sid, pid = await local_agent(local, KIT_THEN_OWN_SAVE)
    token = None
    taken = None
    # Looks of 1 s until the agent's writes are handed over: a time cap, not a count of looks
    # (a loaded machine may take seconds to run the agent's first command).
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        seen = await observe(local, look_input("local", sid, pid, token), 1)
        token, taken = seen.watch_token, taken or seen.requests
        if taken is not None:
            break
    assert taken is not None and taken.status == "ok" and taken.requests is not None
    assert taken.requests.usage is not None and taken.requests.usage.usd == 1.5
    # Known by its digest, it is no news again.
    known = look_input("local", sid, pid, None, known_requests_digest=taken.digest)
    again = await observe(local, known, 1)
    assert again.requests is None
    # Nor is a file that is not there news to a run that has seen none.
    bare, bare_pid = await local_agent(local)
    assert (await observe(local, look_input("local", bare, bare_pid, None), 1)).requests is None


async def test_a_hostile_requests_file_is_refused_saying_why_and_never_raises(
    local: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid, _ = await local_agent(local)
    host = local.engine.host_path(sid, REQUESTS)

    async def read() -> RequestsRead:
        return await asyncio.wait_for(
            requests_file.read_requests(local, sid, REQUESTS, None, secret_env=["RQ_SECRET"]), 5
        )

    host.unlink(missing_ok=True)
    os.symlink(local.engine.host_path(sid, CHECKPOINT), host)
    local.engine.host_path(sid, CHECKPOINT).write_text(json.dumps(USAGE))
    linked = await read()
    assert linked.requests is None and linked.refused is not None and "link" in linked.refused
    host.unlink()
    os.mkfifo(host)
    fifo = await read()
    assert fifo.requests is None and fifo.refused is not None and "FIFO" in fifo.refused
    host.unlink()
    host.write_bytes(b"x" * (MAX_REQUESTS_BYTES + 1))
    huge = await read()
    assert (huge.status, huge.requests) == ("too_large", None)
    assert huge.refused is not None and "over the 524288 cap" in huge.refused
    for bad in (b"\xff\xfe", b"[" * 100_000, b"not json", b"[1, 2]"):
        host.write_bytes(bad)
        found = await read()
        assert found.refused is not None, bad[:10]
        assert found.requests is None or found.requests.usage is None
    # A secret in it never leaves the worker, however it is spelled.
    monkeypatch.setenv("RQ_SECRET", "hunter2-very-secret")
    outputs = {"token": "hunter2-very-secret", "spelled": "hunter2\\u002dvery-secret"}
    host.write_text(
        json.dumps({"finish": {"summary": "s", "outputs": outputs}}).replace("\\\\", "\\")
    )
    clean = await read()
    assert clean.requests is not None and clean.requests.finish is not None
    assert "hunter2" not in clean.model_dump_json()
    # Gone after it said something: news once, then not again.
    host.unlink()
    gone = await requests_file.read_requests(local, sid, REQUESTS, clean.digest)
    assert (gone.status, gone.requests) == ("missing", None)
    later = await requests_file.read_requests(local, sid, REQUESTS, gone.digest)
    assert later.status == "unchanged"


# ---- runtime ------------------------------------------------------------------------------


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home", rules=Rules()) as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


def runtime_with(streams: int) -> RuntimeProvider:
    settings = WatchSettings(streams=streams, events_seconds=0.2)
    return RuntimeProvider(
        timeout_seconds=10, max_retries=2, call_budget_seconds=30, watch_settings=settings
    )


async def runtime_agent(
    provider: RuntimeProvider, name: str, command: str, checkpoint: bytes | None = None
) -> tuple[str, str]:
    """A sandbox (holding `checkpoint`, as a new sandbox holds the last one) and its agent."""
    request = SandboxRequest(name=name, labels={}, timeout_seconds=600, vcpu=1, memory_mib=512)
    info, _ = await provider.get_or_create(request)
    if checkpoint is not None:
        await provider.write_file(info.sandbox_id, CHECKPOINT, checkpoint)
    key = f"{name}-1-0"
    launch = AgentLaunch(key, command, "/workspace", {}, exit_marker_path(CHECKPOINT, key))
    agent = await provider.start_agent(info.sandbox_id, launch)
    return info.sandbox_id, agent.process_id


@pytest.mark.parametrize("streams", [0, 32], ids=["feed", "stream"])
async def test_on_runtime_the_requests_file_costs_a_stat_per_new_watch_and_a_read_per_write(
    fake: FakeRuntime, streams: int
) -> None:
    provider = runtime_with(streams)
    try:
        sid, pid = await runtime_agent(provider, f"rq-{streams}", "sleep 600", b'{"step": 3}')
        token = None
        for look in range(6):
            # Every third look starts over with no token (a new watch), as after a lost one.
            seen = await observe(
                provider, look_input("runtime", sid, pid, None if look % 3 == 0 else token), 1
            )
            token = seen.watch_token
            assert seen.requests is None
        # A run that never writes the file: one stat of it per new watch, nothing read (beside
        # the checkpoint's and the exit marker's).
        assert fake.request_count(sandbox_id=sid, route="read") == 0
        stats = [r.arg("path") for r in fake.requests("GET", rf"/{sid}/files/stat$")]
        assert stats.count(REQUESTS) == 2 and len(stats) == 6

        # Written (the kit's way, then the agent's own checkpoint): each read once.
        await provider.run(sid, KIT_THEN_OWN_SAVE.removesuffix("; sleep 600"))
        # The two writes may reach the watch in one look or in two (a loaded machine): look
        # until both were handed over, then count the reads.
        taken, saved = None, False
        for _ in range(30):
            seen = await observe(provider, look_input("runtime", sid, pid, token), 5)
            token, taken = seen.watch_token, taken or seen.requests
            saved = saved or (
                seen.checkpoint is not None and '"step": 1' in (seen.checkpoint.text or "")
            )
            if taken is not None and saved:
                break
        assert saved, "the agent's own checkpoint was never handed over"
        assert taken is not None and taken.requests is not None
        assert taken.requests.usage is not None and taken.requests.usage.usd == 1.5
        assert fake.request_count(sandbox_id=sid, route="read") == 2
    finally:
        await provider.aclose()


async def test_a_runtime_requests_file_written_before_the_watch_began_is_read_by_the_new_watch(
    fake: FakeRuntime, tmp_path: Path
) -> None:
    provider = runtime_with(0)
    try:
        sid, pid = await runtime_agent(provider, "rq-early", KIT_THEN_OWN_SAVE)
        # The agent wrote both before anything watched: waited for on the fake's disk (a
        # loaded machine may take seconds to run the agent's first command; a fixed sleep
        # let the watch begin before either was written).
        engine = LocalEngine(tmp_path / "runtime-home")
        written = [engine.host_path(sid, path) for path in (REQUESTS, CHECKPOINT)]
        began = time.monotonic()
        while not all(path.is_file() for path in written):
            assert time.monotonic() - began < CAP, "the agent never wrote its two files"
            await asyncio.sleep(0.05)
        print(f"\nthe agent's files were written {time.monotonic() - began:.2f} s after its start")
        seen = await observe(provider, look_input("runtime", sid, pid, None), 1)
        assert seen.requests is not None and seen.requests.requests is not None
        assert seen.requests.requests.usage is not None
    finally:
        await provider.aclose()
