"""A `FakeWorld` that keeps an account, as Runtime does: what each sandbox was charged, and the
key's daily spending limit, which refuses a create, wake or extension it cannot cover (the
activities' `DailySpendingLimit`, as activities.providers.money raises it)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.models import (
    ActivityName,
    AgentStarted,
    CreateSandboxInput,
    DailyLimitRead,
    ExtendSandboxInput,
    MoneyRead,
    Observation,
    ObserveInput,
    ReadDailyLimitInput,
    SandboxCharge,
    SandboxInfo,
    SandboxRef,
    SandboxSettled,
)
from fakes.activities import FakeWorld, _now

DAILY_LIMIT = "DailySpendingLimit"


class MoneyWorld(FakeWorld):
    def __init__(self) -> None:
        super().__init__()
        # The key's daily limit and what is left of it, in microdollars (None: no limit).
        self.daily_limit: int | None = 10_000_000
        self.daily_left: int | None = 10_000_000
        # What the provider says each sandbox was charged and holds, by sandbox id.
        self.charged: dict[str, tuple[int, int]] = {}
        self.refusals: list[str] = []
        self.limit_reads = 0
        self.money_reads = 0
        self.charge_reads: list[str] = []

    def activities(self) -> list[Callable[..., Any]]:
        return [*super().activities(), self.read_daily_limit]

    def _daily(self) -> DailyLimitRead:
        used = 0 if self.daily_limit is None else self.daily_limit - (self.daily_left or 0)
        return DailyLimitRead(
            limit_micros=self.daily_limit, used_micros=used, remaining_micros=self.daily_left
        )

    def _refuse_past_limit(self, needed: int | None, what: str) -> None:
        if needed is None or self.daily_left is None or self.daily_left >= needed:
            return
        self.refusals.append(what)
        raise ApplicationError(
            f"the key's daily spending limit has {self.daily_left} micros left; {what} needs "
            f"{needed}",
            type=DAILY_LIMIT,
            non_retryable=True,
        )

    def _charge(self, sandbox_id: str) -> SandboxCharge | None:
        if sandbox_id not in self.charged:
            return None
        charged, held = self.charged[sandbox_id]
        return SandboxCharge(sandbox_id=sandbox_id, charged_micros=charged, held_micros=held)

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, request: CreateSandboxInput) -> AgentStarted:
        self._refuse_past_limit(request.lease_cost_micros, f"create {request.attempt}")
        started = await super().create_sandbox(request)
        return started.model_copy(update={"daily": self._daily()})

    @activity.defn(name=ActivityName.WAKE_SANDBOX)
    async def wake_sandbox(self, request: SandboxRef) -> SandboxInfo:
        box = self._answering(request.sandbox_id)
        if box.state == "paused":
            self._refuse_past_limit(request.daily_room_micros, f"wake {box.sandbox_id}")
        return await super().wake_sandbox(request)

    @activity.defn(name=ActivityName.EXTEND_SANDBOX)
    async def extend_sandbox(self, request: ExtendSandboxInput) -> SandboxInfo:
        box = self._answering(request.sandbox_id)
        if request.micros_per_second is not None and box.lease_ends_at is not None:
            until = min(request.until, _now() + timedelta(hours=1))
            seconds = max(0.0, (until - box.lease_ends_at).total_seconds())
            needed = int(seconds * request.micros_per_second)
            self._refuse_past_limit(needed, f"extend {box.sandbox_id}")
        return await super().extend_sandbox(request)

    @activity.defn(name=ActivityName.OBSERVE_AGENT)
    async def observe_agent(self, request: ObserveInput) -> Observation:
        seen = await super().observe_agent(request)
        if not request.read_money:
            return seen
        self.money_reads += 1
        money = MoneyRead(charge=self._charge(request.sandbox_id), daily=self._daily())
        return seen.model_copy(update={"money": money})

    @activity.defn(name=ActivityName.PAUSE_SANDBOX)
    async def pause_sandbox(self, request: SandboxRef) -> SandboxSettled:
        info = await super().pause_sandbox(request)
        return self._settled(info, request)

    @activity.defn(name=ActivityName.STOP_SANDBOX)
    async def stop_sandbox(self, request: SandboxRef) -> SandboxSettled:
        info = await super().stop_sandbox(request)
        return self._settled(info, request)

    def _settled(self, info: SandboxInfo, request: SandboxRef) -> SandboxSettled:
        charge = None
        if request.read_charge:
            self.charge_reads.append(info.sandbox_id)
            charge = self._charge(info.sandbox_id)
        return SandboxSettled(**info.model_dump(), charge=charge)

    @activity.defn(name=ActivityName.READ_DAILY_LIMIT)
    async def read_daily_limit(self, request: ReadDailyLimitInput) -> MoneyRead:
        self.limit_reads += 1
        return MoneyRead(daily=self._daily())
