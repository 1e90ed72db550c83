"""The account routes of the fake Runtime API, `GET /v1/usage` and `GET /v1/limits`, and what a
test may set of the account's money (`MoneyControls`, mixed into `FakeRuntime`).

The billing model is `money`'s. Both routes look at every running sandbox first (a lease may
have ended behind the fake's back), so their figures are those of this moment.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fakes.runtime.http import Request, Response, Route, RouteTable, json_response
from fakes.runtime.money import TRIAL_MS, UNLIMITED_CREDIT_MICROS, Billing, Meter
from fakes.runtime.sandboxes import Sandboxes, iso

if TYPE_CHECKING:
    from fakes.runtime.api import RuntimeApi

# `GET /v1/usage` lists this many resources, newest first.
USAGE_RESOURCES = 100
# The monthly outbound allowance shown (outbound traffic is not modelled: nothing is sent).
OUTBOUND_ALLOWANCE_BYTES = 100 * 1000**3


class MoneyRoutes:
    """`GET /v1/usage` and `GET /v1/limits` over the fake's `Billing`."""

    def __init__(self, sandboxes: Sandboxes) -> None:
        self.sandboxes = sandboxes
        self.billing = sandboxes.billing

    def routes(self) -> RouteTable:
        return [
            Route("GET", re.compile(r"^/v1/usage$"), "usage", self._usage),
            Route("GET", re.compile(r"^/v1/limits$"), "limits", self._limits),
        ]

    async def _usage(self, request: Request, _: list[str]) -> Response:
        newest = self.billing.newest(USAGE_RESOURCES)
        await self.sandboxes.look_at([m.id for m in newest if m.state != "stopped"])
        await self.sandboxes.look_at(self.billing.running_ids())
        resources = [self._resource(meter) for meter in self.billing.newest(USAGE_RESOURCES)]
        spent, held = self.billing.totals()
        credited = self.billing.credit
        credited = UNLIMITED_CREDIT_MICROS if credited is None else credited
        return json_response(
            {
                "credited": str(credited),
                "spent": str(spent),
                "held": str(held),
                "expired": "0",
                "available": str(max(0, credited - spent - held)),
                "takenBack": "0",
                "trial": self._trial(),
                "outbound": _outbound(),
                "resources": resources,
            }
        )

    async def _limits(self, request: Request, _: list[str]) -> Response:
        await self.sandboxes.look_at(self.billing.running_ids())
        limit = self.billing.daily_limit
        daily = None
        if limit is not None:
            used = self.billing.daily_used()
            daily = {
                "limitMicros": str(limit),
                "usedMicros": str(used),
                "remainingMicros": str(max(0, limit - used)),
                "window": "24h",
            }
        return json_response({"access": "full", "daily": daily, "trial": self._trial()})

    def _resource(self, meter: Meter) -> dict[str, Any]:
        running_ms, charged, held = self.billing.figures(meter.id)
        seconds = running_ms / 1000
        return {
            "resourceId": meter.id,
            "name": meter.name,
            "kind": "sandbox",
            "state": meter.state,
            "createdAt": iso(meter.created_at),
            "vcpu": meter.vcpu,
            "memoryMiB": meter.memory_mib,
            "runningSeconds": seconds,
            # CPU use is not measured: a running sandbox is counted as using all its vCPUs.
            "activeCpuSeconds": seconds * meter.vcpu,
            "memoryGiBSeconds": seconds * meter.memory_mib / 1024,
            "rates": self.billing.prices.json(),
            "chargedMicros": str(charged),
            "heldMicros": str(held),
        }

    def _trial(self) -> dict[str, int] | None:
        if not self.billing.trial_exhausted:
            return None
        return {"totalMs": TRIAL_MS, "usedMs": TRIAL_MS, "reservedMs": 0, "availableMs": 0}


def _outbound() -> dict[str, Any]:
    return {
        "month": datetime.now(UTC).strftime("%Y-%m"),
        "sentBytes": 0,
        "freeBytes": 0,
        "billableBytes": 0,
        "allowanceBytes": OUTBOUND_ALLOWANCE_BYTES,
        "chargedMicros": "0",
        "writtenOffMicros": "0",
    }


class MoneyControls:
    """Mixed into `FakeRuntime`: the account's money as a test sets and reads it. Safe to call
    from the test's thread, before the fake starts too (setters) or while it runs."""

    billing: Billing
    _api: RuntimeApi | None
    _loop: asyncio.AbstractEventLoop | None

    def set_daily_limit(self, micros: int | None) -> None:
        """The key's daily spending limit (None: no limit, `daily: null`)."""
        self.billing.daily_limit = micros

    def forget_daily_spend(self) -> None:
        """The 24-hour window reopens: what was committed so far no longer counts."""
        self.set_daily_used(0)

    def set_daily_used(self, micros: int) -> None:
        """Make the window's `usedMicros` `micros` now (what was committed before is forgotten;
        what is committed from now on adds to it)."""
        self._look_at_running()
        self.billing.forget(micros)

    def set_credit(self, micros: int | None) -> None:
        """The account's credit (`credited`); None (the default): unlimited."""
        self.billing.credit = micros

    def exhaust_trial(self, exhausted: bool = True) -> None:
        """Every create, wake and extension answers 402 `trial_exhausted` (False: no more)."""
        self.billing.trial_exhausted = exhausted

    def add_running_time(self, sandbox_id: str, seconds: float) -> None:
        """Bill the sandbox as if it had run `seconds` more: time passing for the meter only
        (its lease and state are left as they are)."""
        self._look_at_running()
        self.billing.add_running_time(sandbox_id, seconds)

    def charged_micros(self, sandbox_id: str) -> int:
        """What the sandbox was charged so far (its running time x its price)."""
        self._look_at_running()
        return self.billing.figures(sandbox_id)[1]

    def held_micros(self, sandbox_id: str) -> int:
        """What is held for the rest of the sandbox's lease (0 unless it runs)."""
        self._look_at_running()
        return self.billing.figures(sandbox_id)[2]

    def daily_used_micros(self) -> int:
        """The daily window's `usedMicros` now (whether or not a limit is set)."""
        self._look_at_running()
        return self.billing.daily_used()

    def _look_at_running(self) -> None:
        """Let the fake see lease ends that passed, before the figures are read."""
        api, loop = self._api, self._loop
        if api is None or loop is None or not loop.is_running() or _inside(loop):
            return
        work = api.sandboxes.look_at(self.billing.running_ids())
        asyncio.run_coroutine_threadsafe(work, loop).result(timeout=60)


def _inside(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this is the fake's own thread (a hook of the fake: it must not wait on itself)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
