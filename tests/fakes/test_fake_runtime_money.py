"""The fake Runtime API's money, proven through the real `withruntime` SDK.

Section 6 of the contract: `GET /v1/usage` (charges only while running, money held for the
rest of a lease, the newest hundred resources), `GET /v1/limits` (the key's daily limit), and
the 402s a create, wake or extension meets past the limit or the credit, charging nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import withruntime

from fakes.runtime import FakeRuntime, Prices, Rules

# 1 vCPU at these prices costs 10,000 microdollars a second (10 a millisecond): easy to see.
FAST_PRICES = Prices(vcpu_hour_micros=36_000_000, gib_hour_micros=0)
# The first lease of a default-sized sandbox (2 vCPU, 4 GiB) of 600 s at the default prices:
# (2 x 25,000 + 4 x 7,500) x 600 / 3,600.
DEFAULT_LEASE_COST = 13_333


@pytest.fixture
def fake(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeRuntime]:
    options: dict[str, Any] = getattr(request, "param", {})
    with FakeRuntime.local(tmp_path / "runtime-home", **options) as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


@pytest_asyncio.fixture
async def rt(fake: FakeRuntime) -> AsyncIterator[withruntime.AsyncRuntime]:
    client = withruntime.AsyncRuntime(timeout=10, max_retries=1, wait_for_capacity=0)
    try:
        yield client
    finally:
        await client.close()


fast_prices = pytest.mark.parametrize("fake", [{"prices": FAST_PRICES}], indirect=True)


async def new_sandbox(rt: withruntime.AsyncRuntime, **fields: Any) -> withruntime.AsyncSandbox:
    sandbox: withruntime.AsyncSandbox = await rt.sandboxes.create(
        **({"timeout_seconds": 600} | fields)
    )
    return sandbox


async def resource(rt: withruntime.AsyncRuntime, sandbox_id: str) -> dict[str, Any]:
    usage = await rt.usage()
    found: list[dict[str, Any]] = [r for r in usage["resources"] if r["resourceId"] == sandbox_id]
    assert len(found) == 1, usage["resources"]
    return found[0]


def micros(value: str) -> int:
    assert isinstance(value, str)  # money is integer microdollars in strings
    return int(value)


async def refused(call: Any, code: str) -> withruntime.RuntimeError:
    with pytest.raises(withruntime.RuntimeError) as caught:
        await call
    assert (caught.value.code, caught.value.status) == (code, 402), caught.value
    return caught.value


# --- usage ---


@fast_prices
async def test_a_sandbox_is_charged_only_while_it_runs(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    began = time.monotonic()
    sandbox = await new_sandbox(rt, vcpu=1, memory_mib=512)
    await asyncio.sleep(0.3)
    running = await resource(rt, sandbox.id)
    # It ran at most from `began` until now, however slow the machine (a fixed 5 s was not).
    took = time.monotonic() - began + 0.01
    assert running["kind"] == "sandbox" and running["state"] == "running"
    assert (running["vcpu"], running["memoryMiB"]) == (1, 512)
    assert 0.3 <= running["runningSeconds"] <= took
    charged = micros(running["chargedMicros"])
    assert charged == round(running["runningSeconds"] * 10_000)
    held = micros(running["heldMicros"])
    assert (600 - took) * 10_000 <= held <= 600 * 10_000  # the rest of its 600 s lease

    await sandbox.pause()
    paused = await resource(rt, sandbox.id)
    assert paused["state"] == "paused" and micros(paused["heldMicros"]) == 0
    await asyncio.sleep(0.2)
    later = await resource(rt, sandbox.id)
    assert later["chargedMicros"] == paused["chargedMicros"]  # paused: nothing more
    assert later["runningSeconds"] == paused["runningSeconds"]

    await sandbox.wake()
    await asyncio.sleep(0.2)
    woken = await resource(rt, sandbox.id)
    assert micros(woken["chargedMicros"]) >= micros(paused["chargedMicros"]) + 2_000
    assert micros(woken["heldMicros"]) > 0
    await sandbox.stop()
    stopped = await resource(rt, sandbox.id)  # usage stays after a stop
    assert stopped["state"] == "stopped" and micros(stopped["heldMicros"]) == 0
    assert fake.charged_micros(sandbox.id) == micros(stopped["chargedMicros"])


@fast_prices
async def test_a_lease_end_stops_the_charge_at_the_lease_end(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    began = time.monotonic()
    sandbox = await new_sandbox(rt, vcpu=1, memory_mib=512)
    fake.end_lease_in(sandbox.id, 0.2)
    # It ran from after `began` to 0.2 s after the lease was set, however slow the machine.
    at_most = time.monotonic() - began + 0.2
    await asyncio.sleep(0.5)
    ended = await resource(rt, sandbox.id)  # seen only now: billed up to the lease end
    assert ended["state"] == "paused" and ended["heldMicros"] == "0"
    assert 0.15 <= ended["runningSeconds"] <= at_most + 0.01  # 0.5 s more if billed till seen


async def test_usage_answers_the_account_and_its_money_as_strings(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    usage = await rt.usage()
    spent, held = micros(usage["spent"]), micros(usage["held"])
    assert 0 < held <= DEFAULT_LEASE_COST
    assert micros(usage["available"]) == micros(usage["credited"]) - spent - held
    assert (usage["expired"], usage["takenBack"], usage["trial"]) == ("0", "0", None)
    assert usage["outbound"]["chargedMicros"] == "0"
    (only,) = usage["resources"]
    assert only["resourceId"] == sandbox.id and only["rates"] == {
        "vcpuHourMicros": "25000",
        "gibHourMicros": "7500",
    }
    fake.set_credit(50_000)
    usage = await rt.usage()
    assert usage["credited"] == "50000"
    assert micros(usage["available"]) == 50_000 - micros(usage["spent"]) - micros(usage["held"])


async def test_usage_lists_the_newest_hundred_newest_first(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    first = await new_sandbox(rt, name="first")
    await first.stop()
    rest = [(await new_sandbox(rt, name=f"s{n}")).id for n in range(100)]
    usage = await rt.usage()
    listed = [r["resourceId"] for r in usage["resources"]]
    assert listed == rest[::-1]
    assert first.id not in listed  # the 101st newest
    assert fake.counts_by_route()["usage"] == 1


async def test_added_running_time_is_billed_exactly(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.stop()
    before = fake.charged_micros(sandbox.id)
    fake.add_running_time(sandbox.id, 3600)
    after = fake.charged_micros(sandbox.id)
    assert after - before in (80_000, 80_001)  # an hour, whatever the rounding before
    assert micros((await resource(rt, sandbox.id))["chargedMicros"]) == after


# --- limits ---


async def test_limits_answer_no_daily_limit_until_one_is_set(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    assert await rt.limits.get() == {"access": "full", "daily": None, "trial": None}
    sandbox = await new_sandbox(rt)
    fake.set_daily_limit(25_000_000)
    daily = (await rt.limits.get())["daily"]
    used = micros(daily["usedMicros"])
    assert fake.charged_micros(sandbox.id) + fake.held_micros(sandbox.id) - used in (-2, -1, 0)
    assert DEFAULT_LEASE_COST - 5 <= used <= DEFAULT_LEASE_COST  # its lease, charged or held
    assert daily == {
        "limitMicros": "25000000",
        "usedMicros": str(used),
        "remainingMicros": str(25_000_000 - used),
        "window": "24h",
    }
    assert fake.counts_by_route()["limits"] == 2


async def test_a_create_past_the_daily_limit_is_refused_and_charges_nothing(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.set_daily_limit(10_000)
    error = await refused(new_sandbox(rt), "spending_limit_reached")
    assert error.hint == "read GET /v1/limits" and error.request_id
    assert error.details is not None and error.details["neededMicros"] == str(DEFAULT_LEASE_COST)
    assert not error.retryable
    usage = await rt.usage()
    assert (usage["resources"], usage["spent"], usage["held"]) == ([], "0", "0")
    assert [s async for s in await rt.sandboxes.list(include_stopped=True)] == []

    smaller = await new_sandbox(rt, timeout_seconds=300)  # half the lease fits
    assert smaller.state == "running"
    await refused(new_sandbox(rt, timeout_seconds=300), "spending_limit_reached")


async def test_the_window_reopening_lets_a_create_through(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.set_daily_limit(DEFAULT_LEASE_COST + 100)
    await new_sandbox(rt)
    await refused(new_sandbox(rt), "spending_limit_reached")
    fake.forget_daily_spend()
    assert (await rt.limits.get())["daily"]["usedMicros"] == "0"
    second = await new_sandbox(rt)
    used = micros((await rt.limits.get())["daily"]["usedMicros"])
    assert DEFAULT_LEASE_COST - 5 <= used <= DEFAULT_LEASE_COST + 2  # only the new lease
    fake.set_daily_used(DEFAULT_LEASE_COST)
    await refused(second.extend(60), "spending_limit_reached")


@fast_prices
async def test_a_wake_past_the_limit_leaves_the_sandbox_paused(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt, name="sleepy", vcpu=1, memory_mib=512)
    await sandbox.pause()
    charged = fake.charged_micros(sandbox.id)
    fake.set_daily_limit(fake.daily_used_micros() + 700_000)  # 70 s: a 600 s lease is more

    await refused(sandbox.wake(), "spending_limit_reached")
    await refused(sandbox.exec("true"), "spending_limit_reached")  # an automatic wake
    await refused(
        rt.sandboxes.get_or_create("sleepy", timeout_seconds=600), "spending_limit_reached"
    )
    assert (await rt.sandboxes.get(sandbox.id)).state == "paused"
    assert fake.wakes == [] and fake.charged_micros(sandbox.id) == charged

    await sandbox.wake(timeout_seconds=60)  # a shorter fresh lease fits
    assert (await rt.sandboxes.get(sandbox.id)).state == "running"


@fast_prices
async def test_an_extension_past_the_limit_is_refused_and_the_lease_kept(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt, vcpu=1, memory_mib=512, timeout_seconds=60)
    fake.set_daily_limit(fake.daily_used_micros() + 1_000_000)  # 100 s more
    ends = fake.lease_ends_at(sandbox.id)
    await refused(sandbox.extend(300), "spending_limit_reached")
    assert fake.lease_ends_at(sandbox.id) == ends
    await sandbox.extend(60)
    assert micros((await resource(rt, sandbox.id))["heldMicros"]) > 60 * 10_000


async def test_past_the_credit_a_create_is_refused_insufficient_funds(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.set_credit(DEFAULT_LEASE_COST - 1)
    error = await refused(new_sandbox(rt), "insufficient_funds")
    assert error.details == {
        "availableMicros": str(DEFAULT_LEASE_COST - 1),
        "neededMicros": str(DEFAULT_LEASE_COST),
    }
    fake.set_credit(None)
    await new_sandbox(rt)


async def test_an_exhausted_trial_refuses_spending(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    fake.exhaust_trial()
    await refused(new_sandbox(rt), "trial_exhausted")
    await refused(sandbox.extend(60), "trial_exhausted")
    trial = (await rt.limits.get())["trial"]
    assert trial is not None and trial["availableMs"] == 0
    fake.exhaust_trial(False)
    await sandbox.extend(60)


async def test_with_the_rule_off_nothing_is_refused(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.rules.spending_limits = False
    fake.set_daily_limit(0)
    fake.set_credit(0)
    sandbox = await new_sandbox(rt)
    await sandbox.pause()
    await sandbox.wake()
    await sandbox.extend(60)
    daily = (await rt.limits.get())["daily"]
    assert micros(daily["usedMicros"]) > 0 and daily["remainingMicros"] == "0"
    assert Rules.lenient().spending_limits is False


async def test_the_money_routes_are_rate_limited(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    fake.rules.burst, fake.rules.rate_per_second, fake.rules.max_queue_seconds = 1, 0.5, 0.05
    with pytest.raises(withruntime.RateLimitError):
        for path in ("/v1/usage", "/v1/limits", "/v1/usage"):
            await rt._t.json("GET", path, deadline=time.monotonic() + 1)
    assert (
        fake.request_count(route="usage", status=429)
        + fake.request_count(route="limits", status=429)
        >= 1
    )
