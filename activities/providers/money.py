"""Money, provider side: what a sandbox was really charged, and what the key may still spend.

A provider that keeps an account (Runtime) implements `AccountProvider`; the local provider
does not, and a run on it keeps the estimate (sandbox lifetime x `rates`). Reads of charges
are best effort (a failed one leaves the estimate in place); the daily-limit check before a
create, wake or extension is not: when the key's remaining daily limit cannot cover what the
step would commit, the step is refused with `DailySpendingLimit` before anything is spent,
and the run waits for the window to reopen instead of meeting a failed create.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from activities.models import DailyLimitRead, MoneyRead, SandboxCharge
from activities.providers.protocol import ProviderError

log = logging.getLogger(__name__)

DAILY_LIMIT_KIND = "DailySpendingLimit"
MICROS_PER_USD = 1_000_000


@runtime_checkable
class AccountProvider(Protocol):
    """A provider that can say what its sandboxes were charged and what the key may spend."""

    async def charges(self, sandbox_ids: list[str], *, fresh: bool) -> dict[str, SandboxCharge]:
        """Charges of those sandboxes the account still lists (others are left out).
        `fresh`: not from a read shared with other runs a moment ago."""
        ...

    async def daily_limit(self, *, fresh: bool) -> DailyLimitRead:
        """The key's daily spending limit (`limit_micros` None: none set)."""
        ...


def account_of(provider: object) -> AccountProvider | None:
    return provider if isinstance(provider, AccountProvider) else None


def usd(micros: int | float) -> str:
    return f"${micros / MICROS_PER_USD:,.2f}"


async def ensure_daily_room(
    provider: object, needed_micros: int | None, what: str
) -> DailyLimitRead | None:
    """The key's daily limit, read fresh; `DailySpendingLimit` when what is left of it cannot
    cover `needed_micros` (what `what` would commit). None when not checked."""
    account = account_of(provider)
    if account is None or needed_micros is None:
        return None
    daily = await account.daily_limit(fresh=True)
    left = daily.remaining_micros
    if left is not None and left < needed_micros:
        raise daily_limit_error(
            f"the key's daily spending limit has {usd(left)} of {usd(daily.limit_micros or 0)} "
            f"left, and {what} would commit {usd(needed_micros)}"
        )
    return daily


def daily_limit_error(text: str) -> ProviderError:
    return ProviderError(text, kind=DAILY_LIMIT_KIND, retryable=False)


async def read_money(provider: object, sandbox_id: str | None, *, fresh: bool) -> MoneyRead:
    """What `sandbox_id` has cost and the key's daily limit, best effort."""
    account = account_of(provider)
    if account is None:
        return MoneyRead(keeps_account=False)
    charge = None
    daily = None
    try:
        if sandbox_id is not None:
            charge = (await account.charges([sandbox_id], fresh=fresh)).get(sandbox_id)
        daily = await account.daily_limit(fresh=fresh)
    except (ProviderError, OSError) as error:
        log.warning("could not read charges or the daily limit: %s", error)
    return MoneyRead(charge=charge, daily=daily)


async def read_charge(provider: object, sandbox_id: str) -> SandboxCharge | None:
    """One sandbox's charges, read fresh (at its end), best effort."""
    account = account_of(provider)
    if account is None:
        return None
    try:
        return (await account.charges([sandbox_id], fresh=True)).get(sandbox_id)
    except (ProviderError, OSError) as error:
        log.warning("could not read what sandbox %s was charged: %s", sandbox_id, error)
        return None
