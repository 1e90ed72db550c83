"""The runtime provider's money through the real `withruntime` SDK against the loopback fake:
what Runtime charged each sandbox, the key's daily limit, and which 402 means what."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from activities.providers.money import ensure_daily_room, read_money
from activities.providers.protocol import ProviderError, SandboxRequest
from activities.providers.runtime.provider import RuntimeProvider
from fakes.runtime import FakeRuntime


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home") as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


@pytest_asyncio.fixture
async def provider(fake: FakeRuntime) -> AsyncIterator[RuntimeProvider]:
    provider = RuntimeProvider(timeout_seconds=5, max_retries=2, call_budget_seconds=20)
    try:
        yield provider
    finally:
        await provider.aclose()


def request(name: str, timeout: float = 600) -> SandboxRequest:
    return SandboxRequest(
        name=name, labels={"overnight-run": name}, timeout_seconds=timeout, vcpu=2, memory_mib=4096
    )


async def test_charges_are_runtimes_settled_and_held_figures_per_sandbox(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    first, _ = await provider.get_or_create(request("money-a-1"))
    other, _ = await provider.get_or_create(request("money-b-1"))
    fake.add_running_time(first.sandbox_id, 3600)
    # What is held shrinks as the lease runs down: read the fake's figure on both sides.
    # And what is charged grows with the running time: read it on both sides too.
    held_before = fake.held_micros(first.sandbox_id)
    charged_before = fake.charged_micros(first.sandbox_id)
    found = await provider.charges([first.sandbox_id], fresh=True)
    held_after = fake.held_micros(first.sandbox_id)
    charged_after = fake.charged_micros(first.sandbox_id)
    assert list(found) == [first.sandbox_id]  # only those asked for
    charge = found[first.sandbox_id]
    assert charged_before <= charge.charged_micros <= charged_after
    assert charge.charged_micros >= 80_000
    assert held_before >= charge.held_micros >= held_after > 0
    await provider.pause(first.sandbox_id)
    paused = (await provider.charges([first.sandbox_id], fresh=True))[first.sandbox_id]
    assert paused.held_micros == 0 and paused.charged_micros >= charge.charged_micros
    await provider.stop(other.sandbox_id)


async def test_a_shared_read_is_answered_again_and_a_fresh_one_asks(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    box, _ = await provider.get_or_create(request("money-c-1"))
    for _ in range(5):
        await read_money(provider, box.sandbox_id, fresh=False)
    assert fake.request_count(route="usage") == 1
    assert fake.request_count(route="limits") == 1
    await provider.charges([box.sandbox_id], fresh=True)
    assert fake.request_count(route="usage") == 2
    await provider.stop(box.sandbox_id)


async def test_the_daily_limit_is_read_and_refuses_what_it_cannot_cover(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    assert (await provider.daily_limit(fresh=True)).limit_micros is None
    fake.set_daily_limit(50_000)
    daily = await ensure_daily_room(provider, 40_000, "a lease")
    assert daily is not None and daily.remaining_micros == 50_000
    with pytest.raises(ProviderError) as refused:
        await ensure_daily_room(provider, 60_000, "a new sandbox's first lease")
    assert refused.value.kind == "DailySpendingLimit" and not refused.value.retryable
    assert "$0.05 left" in str(refused.value)


async def test_a_402_past_the_daily_limit_waits_for_the_window_and_other_402s_need_a_person(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    fake.set_daily_limit(1_000)
    with pytest.raises(ProviderError) as daily:
        await provider.get_or_create(request("money-d-1"))
    assert daily.value.kind == "DailySpendingLimit"
    fake.set_daily_limit(None)
    fake.set_credit(1_000)
    with pytest.raises(ProviderError) as funds:
        await provider.get_or_create(request("money-e-1"))
    assert funds.value.kind == "SpendingLimit" and not funds.value.retryable
    assert await provider.list({}, include_stopped=True) == []
