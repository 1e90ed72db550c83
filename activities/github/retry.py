"""How long to wait before trying a GitHub request again, by GitHub's documented rules. Pure.

GitHub's "Best practices for using the REST API" and "Rate limits for the REST API" say, for
an answer `403` or `429` that is a rate limit: with a `retry-after` header, wait that many
seconds; with `x-ratelimit-remaining: 0`, wait until `x-ratelimit-reset` (UTC epoch
seconds); otherwise (a secondary limit without either) wait at least a minute, longer each
time it happens again, and give up after some tries. A `403` that is none of these is a
refusal (no permission), never tried again. A `5xx` or a connection that broke is tried again
after a wait that doubles each time (and after `retry-after` when a `503` gives one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

RETRYABLE_SERVER_STATUSES = frozenset({500, 502, 503, 504})
# Added to a reset time: the two clocks may differ by a little, and GitHub rounds.
RESET_MARGIN_SECONDS = 1.0


@dataclass(frozen=True)
class RetryRules:
    """How hard a client tries: `max_tries` requests at most, waiting `max_wait_seconds` in
    all at most (a longer wait is the caller's to make: the error says how long)."""

    max_tries: int = 6
    max_wait_seconds: float = 900
    # Server errors and broken connections: first wait, doubled each time, up to the cap.
    first_backoff_seconds: float = 1
    max_backoff_seconds: float = 60
    # A secondary rate limit that names no time: at least a minute (GitHub's rule), doubled.
    secondary_wait_seconds: float = 60
    # Between two writes (POST, PATCH), as GitHub asks of integrations that write often.
    write_gap_seconds: float = 1


@dataclass(frozen=True)
class Wait:
    seconds: float
    why: str  # "secondary rate limit", "rate limit", "HTTP 502", ...


def is_rate_limit(status: int, headers: Mapping[str, str], message: str) -> bool:
    """A `403`/`429` GitHub sends for a rate limit (not for a missing permission)."""
    if status == 429:
        return True
    if status != 403:
        return False
    lowered = message.lower()
    return (
        "retry-after" in headers
        or headers.get("x-ratelimit-remaining") == "0"
        or "rate limit" in lowered
        or "abuse" in lowered
    )


def wait_for_answer(
    status: int,
    headers: Mapping[str, str],
    message: str,
    *,
    attempt: int,
    limited_before: int,
    now: float,
    rules: RetryRules,
) -> Wait | None:
    """The wait before trying again a request answered `status` (`headers` with lower-case
    names); None: do not try again. `attempt`: 1 for the first answer; `limited_before`: how
    many earlier answers to this request were secondary rate limits without a time."""
    if is_rate_limit(status, headers, message):
        named = retry_after_seconds(headers.get("retry-after"), now)
        if named is not None:
            return Wait(named, "secondary rate limit")
        if headers.get("x-ratelimit-remaining") == "0":
            reset = _number(headers.get("x-ratelimit-reset"))
            if reset is not None:
                return Wait(max(0.0, reset - now) + RESET_MARGIN_SECONDS, "rate limit")
        return Wait(rules.secondary_wait_seconds * 2**limited_before, "secondary rate limit")
    if status in RETRYABLE_SERVER_STATUSES:
        named = retry_after_seconds(headers.get("retry-after"), now)
        return Wait(named if named is not None else backoff(attempt, rules), f"HTTP {status}")
    return None


def backoff(attempt: int, rules: RetryRules) -> float:
    """The wait after the `attempt`-th failure that names no time: doubling, capped."""
    return float(min(rules.max_backoff_seconds, rules.first_backoff_seconds * 2 ** (attempt - 1)))


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """`retry-after` as seconds from `now`: a number of seconds, or an HTTP date."""
    if value is None or not value.strip():
        return None
    number = _number(value)
    if number is not None:
        return max(0.0, number)
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None
