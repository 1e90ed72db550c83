"""The one place where `withruntime` failures become overnight's `ProviderError`s.

Temporal's activity retry policy decides what happens next from `retryable`, so the
split matters: a bad key, a refused request or an account that may not spend fails the
run's step at once; an outage, an overload or a lost connection is retried with backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import withruntime

from activities.providers.protocol import ProviderError, SandboxNotFound, SandboxNotRunning

# Codes that mean the account may not spend (more) money: retrying cannot help, a person must.
SPENDING_CODES = frozenset(
    {
        "account_blocked",
        "payment_required",
        "quota_exceeded",
        "spending_limit",
        "spend_limit_reached",
        "max_cost_exceeded",
        "no_credit",
        "no_credit_running_limit",
        "no_credit_total_limit",
        "no_credit_domain_limit",
        "no_credit_capacity_full",
        "account_share_full",
    }
)
# Past the key's daily spending limit (a 402): the run waits for the 24-hour window to reopen.
DAILY_LIMIT_CODES = frozenset({"spending_limit_reached", "spending_limit", "spend_limit_reached"})
# A 409 with one of these is about the sandbox's state, not the request (code -> state).
NOT_RUNNING_CODES = {
    "sandbox_paused": "paused",
    "sandbox_stopped": "stopped",
    "not_running": "not running",
    "start_failed": "not running after its start",
}
# A product switched off on this deployment: retrying cannot switch it on.
SWITCHED_OFF_CODES = frozenset({"unavailable", "unsupported", "feature_unavailable"})


def provider_error(error: Exception, sandbox_id: str | None = None) -> ProviderError:
    """Translate one SDK (or transport) failure into the provider error tree."""
    if isinstance(error, ProviderError):
        return error
    if isinstance(error, TimeoutError):
        return ProviderError("Runtime did not answer in time", kind="RuntimeTimeout")
    if not isinstance(error, withruntime.RuntimeError):
        # A malformed answer (non-JSON 2xx, a missing field): the server's fault, try again.
        return ProviderError(f"unexpected answer from Runtime: {error!r}", kind="RuntimeBadAnswer")
    code, status = error.code, error.status
    text = str(error)
    if isinstance(error, withruntime.AuthenticationError) or code == "missing_api_key":
        return ProviderError(text, kind="AuthenticationFailed", retryable=False)
    if isinstance(error, withruntime.PermissionDeniedError):
        return ProviderError(text, kind="PermissionDenied", retryable=False)
    if code in DAILY_LIMIT_CODES:
        return ProviderError(text, kind="DailySpendingLimit", retryable=False)
    if (
        isinstance(error, withruntime.AccountBlockedError)
        or status == 402
        or code in SPENDING_CODES
    ):
        return ProviderError(text, kind="SpendingLimit", retryable=False)
    if isinstance(error, withruntime.InvalidRequestError):
        return ProviderError(text, kind="InvalidRequest", retryable=False)
    if isinstance(error, withruntime.NotFoundError):
        # A missing file or process is the caller's to interpret; a missing sandbox is typed.
        if sandbox_id is not None and not code.startswith(("file_", "process_", "upload_")):
            return SandboxNotFound(sandbox_id)
        return ProviderError(text, kind="NotFound", retryable=False)
    if code in NOT_RUNNING_CODES and sandbox_id is not None:
        return SandboxNotRunning(sandbox_id, NOT_RUNNING_CODES[code])
    if isinstance(error, withruntime.ConnectionError) or status == 0 or status == 429:
        return ProviderError(text, kind="RuntimeUnavailable")
    if status >= 500:
        # 500, 502-504 and 529 (overloaded) alike: the SDK gave up quickly on purpose, so the
        # activity retry policy's longer backoff takes over. A feature switched off on this
        # deployment says so (`retryable: false` or a deliberate code) and is not retried.
        retryable = error.sent_retryable is not False and code not in SWITCHED_OFF_CODES
        return ProviderError(text, kind="RuntimeUnavailable", retryable=retryable)
    return ProviderError(text, kind="RuntimeError", retryable=error.retryable)


@asynccontextmanager
async def runtime_call(sandbox_id: str | None, budget_seconds: float) -> AsyncIterator[None]:
    """Run one provider operation under a hard time budget, translating its failures.

    The budget bounds the SDK's own waits, some of which ignore `max_retries` (a 429/503
    `busy` is resent for up to five minutes); past it the call fails retryable, and the
    activity's retry policy, not the SDK, decides how long to keep trying.
    """
    try:
        async with asyncio.timeout(budget_seconds):
            yield
    except (withruntime.RuntimeError, OSError, TimeoutError, ValueError, KeyError) as error:
        raise provider_error(error, sandbox_id) from error
