"""The money activity a waiting run calls on its own: the key's daily spending limit.

(Charges and the limit otherwise come back with the steps that read them: an observe, a pause
or stop at a sandbox's end, and the checks before a create, wake or extension.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity

from activities.errors import activity_errors
from activities.models import ActivityName, MoneyRead, ReadDailyLimitInput
from activities.providers.money import account_of
from activities.providers.protocol import SandboxProvider

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]


class DailyLimitActivities:
    def __init__(self, provider: ProviderGetter) -> None:
        self._provider = provider

    def all(self) -> list[Callable[..., Any]]:
        return [self.read_daily_limit]

    @activity.defn(name=ActivityName.READ_DAILY_LIMIT)
    async def read_daily_limit(self, input: ReadDailyLimitInput) -> MoneyRead:
        """Read fresh; a failure is retried by the activity's policy (the run only waits)."""
        provider = await self._provider(input.provider)
        account = account_of(provider)
        if account is None:
            return MoneyRead(keeps_account=False)
        with activity_errors():
            return MoneyRead(daily=await account.daily_limit(fresh=True))
