"""The `runtime` provider through the real `withruntime` SDK against the loopback fake API.

What Runtime adds over the local provider is tested here: faults of the API and the network,
idempotency without a spawn key, the wake-on-read trap, and what goes over the wire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import withruntime
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.models import ActivityName, ListSandboxesInput
from activities.providers.protocol import (
    AgentLaunch,
    ProviderError,
    SandboxNotRunning,
    SandboxRequest,
    WatchRequest,
)
from activities.providers.runtime.convert import start_marker
from activities.providers.runtime.provider import RuntimeProvider
from activities.providers.runtime.watch_stream import exit_marker_path
from activities.worker_activities import WorkerActivities
from fakes.runtime import FakeRuntime
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN
from tests.waits import CAP
from tests.workflows.retry_workflows import ActivityCall, RetriedActivity

CHECKPOINT = "/workspace/checkpoint.json"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home") as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


@pytest_asyncio.fixture
async def provider(fake: FakeRuntime) -> AsyncIterator[RuntimeProvider]:
    # Short SDK waits: these tests are about who retries, not about waiting.
    provider = RuntimeProvider(timeout_seconds=5, max_retries=2, call_budget_seconds=20)
    try:
        yield provider
    finally:
        await provider.aclose()


def request(name: str = "run-a-1", timeout: float = 600) -> SandboxRequest:
    labels = {LABEL_RUN: name.rsplit("-", 1)[0], LABEL_ATTEMPT: name.rsplit("-", 1)[1]}
    return SandboxRequest(
        name=name, labels=labels, timeout_seconds=timeout, vcpu=2, memory_mib=2048
    )


async def created(provider: RuntimeProvider, name: str = "run-a-1") -> str:
    info, _ = await provider.get_or_create(request(name))
    return info.sandbox_id


async def test_create_by_name_is_idempotent_and_asks_for_no_idle_pause(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    first, first_created = await provider.get_or_create(request("run-a-1", timeout=900))
    again, again_created = await provider.get_or_create(request("run-a-1", timeout=900))

    assert (first_created, again_created) == (True, False)
    assert again.sandbox_id == first.sandbox_id
    assert first.labels == {LABEL_RUN: "run-a", LABEL_ATTEMPT: "1"}
    assert [
        s.sandbox_id for s in await provider.list({LABEL_RUN: "run-a"}, include_stopped=True)
    ] == [first.sandbox_id]
    bodies = [r.json() for r in fake.requests("POST", r"^/v1/sandboxes$")]
    assert len(bodies) == 2
    for body in bodies:
        assert body["name"] == "run-a-1"
        assert body["getOrCreate"] is True
        assert body["labels"] == {LABEL_RUN: "run-a", LABEL_ATTEMPT: "1"}
        assert body["idlePauseSeconds"] == 0
        assert body["timeoutSeconds"] == 900
        assert (body["vcpu"], body["memoryMiB"], body["onLeaseEnd"]) == (2, 2048, "pause")


async def test_a_spend_cap_travels_as_max_total_cost_micros_so_runtime_enforces_it(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    capped = dataclasses.replace(request("run-c-1"), max_total_cost_micros=2_500_000)
    await provider.get_or_create(capped)
    await provider.get_or_create(request("run-d-1"))
    first, second = (r.json() for r in fake.requests("POST", r"^/v1/sandboxes$"))
    assert first["maxTotalCostMicros"] == 2_500_000
    assert "maxTotalCostMicros" not in second


async def test_a_command_is_given_at_most_the_lease_left(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    fake.end_lease_in(sandbox_id, 40)
    # Asked for 20 minutes (the clone's timeout): Runtime would answer 409 lease_too_short.
    done = await provider.run(sandbox_id, "echo ok", timeout_seconds=20 * 60)
    assert (done.exit_code, done.stdout) == (0, "ok\n")
    sent = fake.requests("POST", r":exec$")[-1].json()
    assert sent["timeoutMs"] <= 40_000


async def test_a_storm_of_ten_503s_fails_retryable_until_a_retry_succeeds(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    fake.fail(10, 503, route=r"GET /v1/sandboxes/", retry_after=0.01)

    failures: list[ProviderError] = []
    for _attempt in range(10):  # what the activity retry policy does, without its backoff
        try:
            info = await provider.sandbox(sandbox_id)
            break
        except ProviderError as error:
            failures.append(error)
    else:
        pytest.fail("the storm was never absorbed")

    assert info.state == "running"
    assert failures and all(e.retryable and e.kind == "RuntimeUnavailable" for e in failures)
    # Each provider call gives up after the SDK's three quick tries; the fourth call got through.
    assert len(failures) == 3
    assert len(fake.requests("GET", rf"^/v1/sandboxes/{sandbox_id}$")) == 11


async def list_through_a_worker(
    env: WorkflowEnvironment, provider: RuntimeProvider, run_id: str
) -> tuple[dict[str, Any], int]:
    """The real `list_sandboxes` activity under a retry policy: its result and attempts."""
    task_queue = f"runtime-{uuid.uuid4()}"
    call = ActivityCall(
        activity=ActivityName.LIST_SANDBOXES,
        arg=ListSandboxesInput(provider="runtime", run_id=run_id).model_dump(),
    )
    async with WorkerActivities(providers={"runtime": provider}) as activities:
        async with Worker(
            env.client,
            task_queue=task_queue,
            workflows=[RetriedActivity],
            activities=activities.all(),
        ):
            handle = await env.client.start_workflow(
                RetriedActivity.run, call, id=task_queue, task_queue=task_queue
            )
            return await handle.result(), await activity_attempts(handle.id, env)


async def activity_attempts(workflow_id: str, env: WorkflowEnvironment) -> int:
    history = await env.client.get_workflow_handle(workflow_id).fetch_history()
    started = [e.activity_task_started_event_attributes for e in history.events]
    return max(a.attempt for a in started)


async def test_a_storm_of_ten_503s_is_absorbed_by_the_activity_retry_policy(
    fake: FakeRuntime, provider: RuntimeProvider, time_skipping_env: WorkflowEnvironment
) -> None:
    sandbox_id = await created(provider, "run-s-1")
    fake.fail(10, 503, route=r"GET /v1/sandboxes$", retry_after=0.01)

    listed, attempts = await list_through_a_worker(time_skipping_env, provider, "run-s")

    assert [s["sandbox_id"] for s in listed["sandboxes"]] == [sandbox_id]
    assert len(fake.requests("GET", r"^/v1/sandboxes$")) == 11
    # Three SDK tries per attempt: attempts 1-3 met only 503s, the fourth got through.
    assert attempts == 4


async def test_a_bad_key_fails_the_activity_at_once_without_retries(
    fake: FakeRuntime, time_skipping_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNTIME_API_KEY", "not-the-key")
    with pytest.raises(WorkflowFailureError) as failure:
        await list_through_a_worker(time_skipping_env, RuntimeProvider(), "run-k")

    activity_error = failure.value.cause
    assert isinstance(activity_error, ActivityError)
    assert activity_error.retry_state == RetryState.NON_RETRYABLE_FAILURE
    assert isinstance(activity_error.cause, ApplicationError)
    assert activity_error.cause.type == "AuthenticationFailed"
    assert activity_error.cause.non_retryable
    assert len(fake.requests()) == 1


async def test_a_bad_key_fails_at_once_as_non_retryable(
    fake: FakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNTIME_API_KEY", "not-the-key")
    provider = RuntimeProvider()
    try:
        with pytest.raises(ProviderError) as failure:
            await provider.get_or_create(request())
    finally:
        await provider.aclose()

    assert failure.value.retryable is False
    assert failure.value.kind == "AuthenticationFailed"
    # At once: the one request, no retry of it (how long that took is the machine's load).
    assert len(fake.requests()) == 1


async def test_a_missing_key_fails_without_asking_anyone(
    fake: FakeRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUNTIME_API_KEY")
    with pytest.raises(ProviderError) as failure:
        await RuntimeProvider().list({}, include_stopped=False)
    assert (failure.value.kind, failure.value.retryable) == ("MissingCredentials", False)
    assert fake.requests() == []


@pytest.mark.parametrize(
    "arm",
    [lambda f: f.overload(), lambda f: f.fail(1, 500), lambda f: f.drop_connections(None)],
    ids=["529-overloaded", "500", "dropped-connections"],
)
async def test_overload_server_errors_and_dropped_connections_are_retryable(
    fake: FakeRuntime, arm: Callable[[FakeRuntime], object]
) -> None:
    provider = RuntimeProvider(timeout_seconds=2, max_retries=0)
    try:
        arm(fake)
        with pytest.raises(ProviderError) as failure:
            await provider.list({}, include_stopped=False)
        assert (failure.value.kind, failure.value.retryable) == ("RuntimeUnavailable", True)
        fake.faults.clear()
        assert await provider.list({}, include_stopped=False) == []
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("status", "code", "kind", "retryable"),
    [
        (400, "invalid_request", "InvalidRequest", False),
        (422, "invalid_field", "InvalidRequest", False),
        (403, "forbidden", "PermissionDenied", False),
        (402, "account_blocked", "SpendingLimit", False),
        (402, "payment_required", "SpendingLimit", False),
        (429, "quota_exceeded", "SpendingLimit", False),
        (409, "no_credit_running_limit", "SpendingLimit", False),
        (429, "too_many_requests", "RuntimeUnavailable", True),
        (502, "bad_gateway", "RuntimeUnavailable", True),
        (501, "unsupported", "RuntimeUnavailable", False),
    ],
)
async def test_each_kind_of_refusal_maps_to_one_provider_error(
    fake: FakeRuntime, status: int, code: str, kind: str, retryable: bool
) -> None:
    provider = RuntimeProvider(timeout_seconds=2, max_retries=0)
    fake.fail(1, status, code=code, retry_after=0)
    try:
        with pytest.raises(ProviderError) as failure:
            await provider.list({}, include_stopped=False)
    finally:
        await provider.aclose()
    assert (failure.value.kind, failure.value.retryable) == (kind, retryable)


async def test_a_sandbox_that_stops_answering_times_out_retryable(fake: FakeRuntime) -> None:
    provider = RuntimeProvider(timeout_seconds=0.5, max_retries=0, call_budget_seconds=3)
    try:
        sandbox_id = await created(provider)
        fake.stop_answering(sandbox_id)
        started = time.monotonic()
        with pytest.raises(ProviderError) as failure:
            await provider.read_file(sandbox_id, CHECKPOINT, 1024)
        assert failure.value.retryable is True
        # Given up at its 0.5 s timeout (within its 3 s budget), not left hanging on a sandbox
        # that never answers.
        assert time.monotonic() - started < 30
        fake.resume_answering(sandbox_id)
        assert (await provider.read_file(sandbox_id, CHECKPOINT, 1024)).status == "missing"
    finally:
        await provider.aclose()


async def test_a_slow_answer_within_the_timeout_is_just_slow(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    fake.slow(0.3, times=1)
    started = time.monotonic()
    assert await provider.list({}, include_stopped=True) == []
    assert time.monotonic() - started >= 0.3


async def test_the_agent_starts_once_even_if_its_start_runs_twice(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    launch = AgentLaunch(
        start_key="run-a-1-agent-1",
        command="echo started >> /workspace/starts; sleep 30",
        cwd="/workspace",
        env={"OVERNIGHT_RUN_ID": "run-a", "MODEL_KEY": "sekret-value"},
    )
    # The first start's spawn happens, but its answer is lost: the activity fails, retryable.
    fake.lose_answers(None, route=r"POST /v1/sandboxes/[^/]+/processes$")
    no_sdk_retries = RuntimeProvider(timeout_seconds=5, max_retries=0)
    try:
        with pytest.raises(ProviderError) as failure:
            await no_sdk_retries.start_agent(sandbox_id, launch)
        assert failure.value.retryable is True
    finally:
        await no_sdk_retries.aclose()
    fake.faults.clear()

    retried = await provider.start_agent(sandbox_id, launch)
    again = await provider.start_agent(sandbox_id, launch)

    assert retried.process_id == again.process_id
    assert retried.state == "running"
    # One spawn call (its retries repeat its idempotency key), one process.
    spawns = fake.requests("POST", r"/processes$")
    assert len({r.headers["idempotency-key"] for r in spawns}) == 1
    assert start_marker("run-a-1-agent-1") in spawns[0].json()["command"]
    # The agent writes its line soon after it starts: a time cap, not a count of looks (a
    # loaded machine may take seconds to start it).
    give_up = time.monotonic() + CAP
    while time.monotonic() < give_up:
        starts = await provider.run(sandbox_id, "cat /workspace/starts 2>/dev/null")
        if starts.stdout:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    assert (await provider.run(sandbox_id, "cat /workspace/starts")).stdout == "started\n"
    # The secret went in the spawn's env and nowhere else.
    assert spawns[0].json()["env"]["MODEL_KEY"] == "sekret-value"
    others = [r for r in fake.requests() if r not in spawns]
    assert all(b"sekret-value" not in r.body for r in others)


async def test_a_repeated_idempotency_key_gets_the_first_answer(fake: FakeRuntime) -> None:
    body = {"name": "run-i-1", "labels": {LABEL_RUN: "run-i"}}
    async with withruntime.AsyncRuntime(max_retries=0) as client:
        first = await client.request("POST", "/v1/sandboxes", body=body, idempotency_key="k1")
        again = await client.request("POST", "/v1/sandboxes", body=body, idempotency_key="k1")
        with pytest.raises(withruntime.ConflictError):  # a new key: the name is taken
            await client.request("POST", "/v1/sandboxes", body=body, idempotency_key="k2")
    assert again == first
    assert first["reused"] is False


async def test_reading_a_paused_sandbox_is_refused_without_waking_it(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    await provider.write_file(sandbox_id, CHECKPOINT, b'{"next": "step 2"}')
    paused = await provider.pause(sandbox_id)
    assert paused.state == "paused"
    asked_before = len(fake.requests())

    with pytest.raises(SandboxNotRunning):
        await provider.read_file(sandbox_id, CHECKPOINT, 1024)

    assert fake.wakes == []
    assert [r.path for r in fake.requests()[asked_before:]] == [f"/v1/sandboxes/{sandbox_id}"]
    assert (await provider.sandbox(sandbox_id)).state == "paused"


async def test_the_fake_wakes_a_paused_sandbox_on_a_read_as_runtime_does(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    """The trap the provider avoids is real in the fake: an unguarded SDK read wakes it."""
    sandbox_id = await created(provider)
    await provider.write_file(sandbox_id, CHECKPOINT, b"{}")
    await provider.pause(sandbox_id)
    async with withruntime.AsyncRuntime(max_retries=0) as client:
        sandbox = await client.sandboxes.get(sandbox_id)
        assert await sandbox.files.read(CHECKPOINT) == b"{}"
    assert [woken for woken, _ in fake.wakes] == [sandbox_id]
    assert (await provider.sandbox(sandbox_id)).state == "running"


async def test_an_oversize_checkpoint_is_refused_without_downloading_it_all(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    made = await provider.run(sandbox_id, f"truncate -s 256M {CHECKPOINT}")
    assert made.exit_code == 0, made.stderr

    read = await provider.read_file(sandbox_id, CHECKPOINT, 262_144)

    assert (read.status, read.data) == ("too_large", None)
    assert read.size > 262_144
    # The download is given up past the cap: a small part of the 256 MiB ever leaves.
    assert fake.bytes_sent(route="read", sandbox_id=sandbox_id) < 32 * 1024 * 1024


async def test_a_large_checkpoint_under_the_cap_travels_in_chunks(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    data = bytes(range(256)) * 9000  # 2.3 MB: the SDK's multipart upload
    await provider.write_file(sandbox_id, CHECKPOINT, data)
    read = await provider.read_file(sandbox_id, CHECKPOINT, 4 * 1024 * 1024)
    assert (read.status, read.data) == ("ok", data)
    assert fake.requests("POST", r"/uploads/[^/]+:commit$")


async def test_paths_outside_the_workspace_are_not_asked_for(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    assert (await provider.read_file(sandbox_id, "/etc/passwd", 1024)).status == "outside"
    assert fake.requests("GET", r"/files/") == []


async def test_pause_stop_and_extend_return_the_sandbox(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    assert (await provider.extend(sandbox_id, 120)).state == "running"
    assert fake.requests("POST", r":extend$")[0].json() == {"seconds": 120}
    assert (await provider.pause(sandbox_id)).state == "paused"
    stopped = await provider.stop(sandbox_id)
    assert (stopped.sandbox_id, stopped.state) == (sandbox_id, "stopped")
    assert await provider.list({LABEL_RUN: "run-a"}, include_stopped=False) == []
    assert (await provider.sandbox("never-made")).state == "missing"


def test_one_provider_serves_one_event_loop_after_another(fake: FakeRuntime) -> None:
    """Each loop gets its own client: pooled connections never cross loops."""
    provider = RuntimeProvider(timeout_seconds=5)
    answers: list[int] = []

    async def use() -> None:
        answers.append(len(await provider.list({}, include_stopped=True)))
        await provider.aclose()

    for _ in range(2):
        thread = threading.Thread(target=asyncio.run, args=(use(),))
        thread.start()
        thread.join(timeout=30)
    assert answers == [0, 0]


async def test_a_watch_is_started_again_when_lost_tokens_left_four_running(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    agent = await provider.start_agent(
        sandbox_id, AgentLaunch(start_key="w", command="sleep 30", cwd="/workspace")
    )
    # Four watches whose tokens nobody kept (Runtime runs at most four in a sandbox).
    for _ in range(4):
        lost = await provider.watch(
            WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=None, wait_seconds=1)
        )
        assert lost.token is not None
    seen = await provider.watch(
        WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=None, wait_seconds=1)
    )
    assert seen.token is not None and seen.sandbox.state == "running"
    assert fake.request_count(sandbox_id=sandbox_id, route="watch_stop") >= 1


async def test_news_read_from_before_a_pause_wakes_nothing_and_is_acted_on_after_the_wake(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    sandbox_id = await created(provider)
    launch = AgentLaunch(
        start_key="w-1",
        command="sleep 0.5; exit 3",
        cwd="/workspace",
        exit_marker=exit_marker_path(CHECKPOINT, "w-1"),
    )
    agent = await provider.start_agent(sandbox_id, launch)
    first = await provider.watch(
        WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=None, wait_seconds=5)
    )
    await asyncio.sleep(1.5)  # the agent has exited, unwatched
    fake.end_lease_in(sandbox_id, 0.1)  # ... and then the lease ended: paused
    await asyncio.sleep(1.0)
    wakes_before = len(fake.wakes)

    # A retried observe reads from its first cursor: the exit is old news, the pause newer.
    seen = await provider.watch(
        WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=first.token, wait_seconds=10)
    )
    assert seen.sandbox.state == "paused"
    assert len(fake.wakes) == wakes_before, "asking about the exit woke the paused sandbox"
    assert (await provider.sandbox(sandbox_id)).state == "paused"

    await provider.wake(sandbox_id)
    after = await provider.watch(
        WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=seen.token, wait_seconds=10)
    )
    assert (after.process.state, after.process.exit_code) == ("exited", 3)


async def test_one_worker_holds_its_streams_and_watches_the_other_runs_through_the_feed(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    """A watch queued behind a full stream pool would return "quiet" without looking: past its
    streams (32 by default) a worker watches through the account's events instead."""
    runs = 45
    tokens: list[tuple[str, str, str | None]] = []
    for n in range(runs):
        sandbox_id = await created(provider, f"many-{n}-1")
        agent = await provider.start_agent(
            sandbox_id, AgentLaunch(start_key=f"m-{n}", command="sleep 60", cwd="/workspace")
        )
        first = await provider.watch(
            WatchRequest(sandbox_id, agent.process_id, CHECKPOINT, token=None, wait_seconds=1)
        )
        tokens.append((sandbox_id, agent.process_id, first.token))
    began = time.monotonic()
    seen = await asyncio.gather(
        *(
            provider.watch(WatchRequest(s, p, CHECKPOINT, token=t, wait_seconds=10))
            for s, p, t in tokens
        )
    )
    # All held at once: done in one wait (10 s, and 0.1 s more here), not two (20 s).
    assert time.monotonic() - began < 15
    assert all(s.sandbox.state == "running" and not s.checkpoint_touched for s in seen)
    # Every run's watch reached Runtime: 32 streams, and the feed for the other 13.
    streams = provider.watch_settings.streams
    assert fake.counts_by_route().get("watch_events", 0) == streams < runs
    assert fake.counts_by_route().get("events", 0) >= 1
