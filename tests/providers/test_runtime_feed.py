"""Runtime watching past a worker's held streams: the account's events (`GET /v1/events`) through
the real `withruntime` SDK against the strict fake, and the provider's event feed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import withruntime

from activities.models import ObserveInput
from activities.providers.protocol import (
    AgentLaunch,
    ProviderError,
    SandboxRequest,
    Sighting,
    WatchRequest,
)
from activities.providers.runtime import agent_watch, watch_stream
from activities.providers.runtime.provider import RuntimeProvider
from activities.providers.runtime.settings import WatchSettings
from activities.providers.runtime.watch_stream import WatchToken, exit_marker_path
from activities.sandbox.observe import observe
from fakes.runtime import FakeRuntime, Rules
from tests.waits import CAP

CHECKPOINT = "/workspace/checkpoint.json"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home", rules=Rules()) as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


def provider_with(streams: int) -> RuntimeProvider:
    settings = WatchSettings(streams=streams, events_seconds=0.2)
    return RuntimeProvider(
        timeout_seconds=10, max_retries=2, call_budget_seconds=30, watch_settings=settings
    )


@pytest_asyncio.fixture
async def client(fake: FakeRuntime) -> AsyncIterator[withruntime.AsyncRuntime]:
    runtime = withruntime.AsyncRuntime(max_retries=0)
    try:
        yield runtime
    finally:
        await runtime.close()


async def new_sandbox(provider: RuntimeProvider, name: str) -> str:
    request = SandboxRequest(name=name, labels={}, timeout_seconds=600, vcpu=1, memory_mib=512)
    info, _ = await provider.get_or_create(request)
    return info.sandbox_id


async def test_the_account_events_list_each_change_of_a_sandbox_newest_first(
    fake: FakeRuntime, client: withruntime.AsyncRuntime
) -> None:
    sandbox = await client.sandboxes.create(name="ev-1", timeout_seconds=600)
    await sandbox.pause()
    await sandbox.wake()
    await sandbox.stop()

    page = await client.events.list(resource_id=sandbox.id)
    kinds = [event["type"] for event in page["data"]]
    assert kinds == [
        "sandbox.stopped",
        "sandbox.woken",
        "sandbox.paused",
        "sandbox.running",
        "sandbox.created",
    ]
    stopped = page["data"][0]["data"]["sandbox"]
    assert (stopped["id"], stopped["state"], stopped["previousState"]) == (
        sandbox.id,
        "stopped",
        "running",
    )
    one = await client.events.list(resource_id=sandbox.id, limit=2)
    assert [e["type"] for e in one["data"]] == kinds[:2] and one["nextCursor"]
    rest = await client.events.list(resource_id=sandbox.id, cursor=one["nextCursor"])
    assert [e["type"] for e in rest["data"]] == kinds[2:] and rest["nextCursor"] is None
    with pytest.raises(withruntime.InvalidRequestError):
        await client.events.list(limit=101)


async def test_a_webhook_watch_lists_its_changes_as_events_and_a_plain_one_does_not(
    fake: FakeRuntime, client: withruntime.AsyncRuntime
) -> None:
    sandbox = await client.sandboxes.create(name="hook-1", timeout_seconds=600)
    hooked = await sandbox.files.watches.start("/workspace", webhook=True)
    await sandbox.files.watches.start("/workspace")
    await sandbox.files.write("/workspace/a.txt", b"one")
    deadline = time.monotonic() + 30  # a cap: the event comes within the hook's window
    changed: list[dict] = []
    while not changed and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        page = await client.events.list(type="sandbox.files.changed")
        changed = page["data"]
    assert len(changed) == 1, "one event: the plain watch sends nothing"
    data = changed[0]["data"]
    assert data["sandbox"]["id"] == sandbox.id and data["watch"]["id"] == hooked.id
    assert {(e["type"], e["path"]) for e in data["events"]} >= {("create", "/workspace/a.txt")}


async def test_without_a_free_stream_a_crash_is_noticed_through_the_feed(
    fake: FakeRuntime,
) -> None:
    provider = provider_with(streams=0)
    try:
        sandbox_id = await new_sandbox(provider, "feed-1")
        launch = AgentLaunch(
            start_key="feed-1-1-0",
            command="sleep 1; exit 7",
            cwd="/workspace",
            exit_marker=exit_marker_path(CHECKPOINT, "feed-1-1-0"),
        )
        agent = await provider.start_agent(sandbox_id, launch)
        seen = await provider.watch(
            WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=None, wait_seconds=1)
        )
        while seen.process.state == "running":
            seen = await provider.watch(
                WatchRequest(
                    sandbox_id, agent.process_id, CHECKPOINT, token=seen.token, wait_seconds=10
                )
            )
        assert (seen.process.state, seen.process.exit_code) == ("exited", 7)
        assert fake.request_count(route="watch_events") == 0, "no stream was held"
        assert fake.request_count(route="events") >= 1
    finally:
        await provider.aclose()


class OpenStreams:
    """Samples, from a thread, the most watch streams the fake held open at once."""

    def __init__(self, fake: FakeRuntime) -> None:
        self.fake = fake
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> OpenStreams:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            with self.fake.api.traffic.lock:
                served = list(self.fake.api.traffic.served)
            held = sum(1 for s in served if s.route == "watch_events" and not s.done)
            self.most = max(self.most, held)


async def watch_until_ended(
    provider: RuntimeProvider, sandbox_id: str, process_id: str, token: str | None
) -> tuple[Sighting, float]:
    while True:
        seen = await provider.watch(
            WatchRequest(sandbox_id, process_id, CHECKPOINT, token=token, wait_seconds=60)
        )
        token = seen.token
        if seen.process.state != "running":
            return seen, time.monotonic()


async def test_many_runs_past_the_streams_each_get_their_own_news_in_time(
    fake: FakeRuntime,
) -> None:
    """24 runs on a worker with 4 streams: every crash reaches its own run, within the feed's
    time, and no more than 4 streams are ever held."""
    runs, streams = 24, 4
    # Runtime reads a webhook watch at most once a window (its length is not published).
    fake.rules.file_hook_window_seconds = 1.0
    provider = provider_with(streams=streams)
    try:
        agents = []
        for n in range(runs):
            sandbox_id = await new_sandbox(provider, f"many-{n}")
            key = f"many-{n}-1-0"
            # Each writes its checkpoint, waits for the word, then crashes with its own code.
            command = (
                f"echo '{{\"n\": {n}}}' > {CHECKPOINT}; "
                "until [ -f /workspace/go ]; do sleep 0.05; done; "
                f"sleep {1.5 + n * 0.05:.2f}; exit {n + 10}"
            )
            launch = AgentLaunch(key, command, "/workspace", {}, exit_marker_path(CHECKPOINT, key))
            agent = await provider.start_agent(sandbox_id, launch)
            agents.append((sandbox_id, agent.process_id))
        firsts = await asyncio.gather(
            *(
                provider.watch(WatchRequest(s, p, CHECKPOINT, token=None, wait_seconds=1))
                for s, p in agents
            )
        )
        assert all(first.process.state == "running" for first in firsts)
        crash_at = []
        for n, (sandbox_id, _) in enumerate(agents):
            await provider.write_file(sandbox_id, "/workspace/go", b"")
            crash_at.append(time.monotonic() + 1.5 + n * 0.05)
        with OpenStreams(fake) as open_streams:
            ended = await asyncio.gather(
                *(
                    watch_until_ended(provider, s, p, first.token)
                    for (s, p), first in zip(agents, firsts, strict=True)
                )
            )
        assert open_streams.most <= streams
        for n, (seen, noticed_at) in enumerate(ended):
            assert (seen.process.state, seen.process.exit_code) == ("exited", n + 10)
            # Noticed on the feed's news: the watch's batch, Runtime's read of it (at most once
            # a window, and the last change was more than a window before), a look of the feed,
            # about 1.3 s; not at the end of the watch's 60 s window. 20 s tells them apart under
            # any load.
            late = noticed_at - crash_at[n]
            assert late < 20, f"run {n} noticed {late:.2f} s late"
        assert fake.request_count(route="events") >= 1
        assert fake.request_count(status=429) == 0
    finally:
        await provider.aclose()


async def test_an_exit_marker_the_agent_forges_only_makes_the_worker_ask(
    fake: FakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker is the agent's to write: one written before the watch began (found by its
    first look) and one written while it reads are each asked about, a bounded number of
    times, and the agent, still running, is never taken for ended."""
    monkeypatch.setattr(agent_watch, "EXIT_REPORT_TRIES", 2)
    monkeypatch.setattr(agent_watch, "EXIT_RECHECKS", 3)
    monkeypatch.setattr(agent_watch, "EXIT_RECHECK_SECONDS", 0.2)
    provider = provider_with(streams=32)
    try:
        sandbox_id = await new_sandbox(provider, "forger")
        key = "forger-1-0"
        marker = exit_marker_path(CHECKPOINT, key)
        command = (
            f"echo 0 > {marker}.tmp && mv -f {marker}.tmp {marker}; "
            "until [ -f /workspace/go ]; do sleep 0.05; done; "
            f"echo 0 > {marker}.tmp && mv -f {marker}.tmp {marker}; sleep 600"
        )
        launch = AgentLaunch(key, command, "/workspace", {}, marker)
        agent = await provider.start_agent(sandbox_id, launch)
        give_up = time.monotonic() + 60
        while (await provider.read_file(sandbox_id, marker, 64)).status != "ok":
            assert time.monotonic() < give_up, "the agent never wrote its marker"
            await asyncio.sleep(0.05)
        token: str | None = None  # a new watch first, then read on from where it stands
        for forged in ("before the watch", "while it reads"):
            if forged == "while it reads":
                await provider.write_file(sandbox_id, "/workspace/go", b"")
            # Looks until it was asked about 3 times and is no more, then 3 looks that must
            # not ask again (a time cap, not a count of looks: load slows the forger).
            asked, settled = 0, 0
            give_up = time.monotonic() + CAP
            while settled < 3:
                assert time.monotonic() < give_up, f"{forged}: asked {asked} times"
                look = WatchRequest(
                    sandbox_id, agent.process_id, CHECKPOINT, token=token, wait_seconds=1
                )
                seen = await provider.watch(look)
                assert seen.process.state == "running", forged
                token = seen.token
                decoded = WatchToken.decode(token)
                assert decoded is not None
                assert decoded.unconfirmed <= 3, forged  # a bounded number of times
                assert not (settled and decoded.unconfirmed), f"{forged}: asked again"
                asked = max(asked, decoded.unconfirmed)
                settled += asked == 3 and decoded.unconfirmed == 0
    finally:
        await provider.aclose()


async def observe_quietly(
    provider: RuntimeProvider, sandbox_id: str, process_id: str, token: str | None
) -> str | None:
    """One observe as the activity runs it: a short wait, the checkpoint handed over at once."""
    look = ObserveInput(
        provider="runtime",
        sandbox_id=sandbox_id,
        process_id=process_id,
        checkpoint_path=CHECKPOINT,
        max_checkpoint_bytes=65536,
        known_digest=None,
        wait_seconds=1,
        check_interval_seconds=1,
        watch_token=token,
        report_every_seconds=0,
        read_money=False,
        secret_env=[],
    )
    return (await observe(provider, look, 1)).watch_token


@pytest.mark.parametrize("streams", [0, 32])
async def test_an_unchanged_checkpoint_is_stat_not_downloaded_even_by_a_new_watch(
    fake: FakeRuntime, streams: int
) -> None:
    provider = provider_with(streams=streams)
    try:
        sandbox_id = await new_sandbox(provider, f"quiet-{streams}")
        # The copy a new sandbox starts with, written before the agent starts.
        await provider.write_file(sandbox_id, CHECKPOINT, b'{"step": 3}')
        key = f"quiet-{streams}-1-0"
        launch = AgentLaunch(key, "sleep 600", "/workspace", {}, exit_marker_path(CHECKPOINT, key))
        agent = await provider.start_agent(sandbox_id, launch)
        token = None
        for look in range(6):
            # Every third look starts over with no token (a new watch), as after a lost one.
            token = await observe_quietly(
                provider, sandbox_id, agent.process_id, None if look % 3 == 0 else token
            )
        assert fake.request_count(sandbox_id=sandbox_id, route="read") == 0
        # Per new watch: the checkpoint, and the agent's exit marker (an exit before the watch
        # began, reported late, is no news to the watch).
        stats = [r.arg("path") for r in fake.requests("GET", rf"/{sandbox_id}/files/stat$")]
        assert sorted(stats) == sorted([CHECKPOINT, launch.exit_marker] * 2)

        # Written by the agent: the next new watch downloads it, once.
        await provider.run(sandbox_id, f"echo '{{\"step\": 4}}' > {CHECKPOINT}")
        await observe_quietly(provider, sandbox_id, agent.process_id, None)
        assert fake.request_count(sandbox_id=sandbox_id, route="read") == 1
    finally:
        await provider.aclose()


async def test_a_failing_events_route_fails_the_watch_retryably_instead_of_hanging(
    fake: FakeRuntime,
) -> None:
    provider = provider_with(streams=0)
    try:
        sandbox_id = await new_sandbox(provider, "down-1")
        launch = AgentLaunch("down-1-1-0", "sleep 60", "/workspace", {})
        agent = await provider.start_agent(sandbox_id, launch)
        first = await provider.watch(
            WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=None, wait_seconds=0)
        )
        fake.fail(None, 500, route="events")
        began = time.monotonic()
        with pytest.raises(ProviderError) as raised:
            await provider.watch(
                WatchRequest(
                    sandbox_id, agent.process_id, CHECKPOINT, token=first.token, wait_seconds=60
                )
            )
        # Raised as it met the failure (a few seconds of the SDK's retries), not at the end of
        # its 60 s window.
        assert raised.value.retryable and time.monotonic() - began < 30
    finally:
        await provider.aclose()


@pytest.mark.parametrize("streams", [1, 0], ids=["stream", "feed"])
async def test_a_zero_wait_watch_reports_an_exit_whose_event_is_still_batched(
    fake: FakeRuntime, monkeypatch: pytest.MonkeyPatch, streams: int
) -> None:
    """A retried observe near its deadline waits zero seconds. Runtime hands a watch's changes
    over only after its batch (`batchMs`, up to 60 s; the feed lists them only after that), so
    the exit marker's event may not be there yet although the process is reported exited: the
    short look asks the process once (after the sandbox), and sees the exit."""
    monkeypatch.setattr(watch_stream, "WATCH_BATCH_MS", 60_000)  # the marker's event waits
    provider = provider_with(streams=streams)
    try:
        sandbox_id = await new_sandbox(provider, "zero-1")
        launch = AgentLaunch(
            start_key="zero-1-1-0",
            command="sleep 0.5; exit 3",
            cwd="/workspace",
            exit_marker=exit_marker_path(CHECKPOINT, "zero-1-1-0"),
        )
        agent = await provider.start_agent(sandbox_id, launch)
        first = await provider.watch(
            WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=None, wait_seconds=5)
        )
        give_up = time.monotonic() + CAP
        while (await provider.process(sandbox_id, agent.process_id)).state == "running":
            assert time.monotonic() < give_up, "the agent never ended"
            await asyncio.sleep(0.1)
        before = fake.counts_by_route(sandbox_id)
        seen = await provider.watch(
            WatchRequest(
                sandbox_id, agent.process_id, CHECKPOINT, token=first.token, wait_seconds=0
            )
        )
        after = fake.counts_by_route(sandbox_id)
        assert (seen.process.state, seen.process.exit_code) == ("exited", 3)
        spent = {r: n - before.get(r, 0) for r, n in after.items() if n - before.get(r, 0)}
        # One look at what the watch holds (by the stream's way; the feed's is in memory), the
        # sandbox, the process.
        expected = {"get": 1, "process": 1} | ({"watch_events": 1} if streams else {})
        assert spent == expected, spent
    finally:
        await provider.aclose()
