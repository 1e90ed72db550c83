"""The model routes' decisions, pure: which upstream errors the gateway retries and how long it
waits, and the answers it gives itself (a refused token, the spend cap), each in its vendor's
error shape so the client's SDK reads it as it reads the vendor's own.

**Retries.** An upstream 429, 529 or 503 (and a connection that fails before any answer) is
tried again at the gateway, before anything reaches the client, waiting what the answer's
`retry-after-ms` / `retry-after` says, else 1, 2, 4, ... seconds (each at most
`MAX_WAIT_SECONDS`), until `RETRY_BUDGET_SECONDS` of waiting in all; then the client gets
the upstream's last answer, as it came. Not retried: a 429 that is a spent usage window or
quota (Anthropic's `anthropic-ratelimit-unified-status: rejected`, OpenAI's
`usage_limit_reached` / `insufficient_quota`, Google's `QuotaFailure` of a per-day quota),
which no wait of minutes cures and which the coding-agent adapter handles itself, and any
answer saying `x-should-retry: false`. Google says its wait in the body (`RetryInfo`'s
`retryDelay`), taken when no header says one.

**The cap.** A run whose booked spend reached its cap gets, at once and with nothing forwarded,
a 429 that both vendors' SDKs and CLIs take as a rate limit: `retry-after: 60` and
`x-should-retry: false` (the Anthropic and OpenAI SDKs then do not retry it themselves), the
body in the vendor's shape: Anthropic's `rate_limit_error`, OpenAI's `insufficient_quota`
(which Codex and the OpenAI SDKs do not retry), Google's `RESOURCE_EXHAUSTED`. So no client
retries in a tight loop, and a cap raised for the run lets its next request through.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping

RETRIED_STATUSES = frozenset({429, 503, 529})
FIRST_WAIT_SECONDS = 1.0
MAX_WAIT_SECONDS = 60.0
RETRY_BUDGET_SECONDS = 120.0
CAP_RETRY_AFTER_SECONDS = 60
# Error types that mean a spent window or quota, not a passing overload.
NOT_TRANSIENT = ("usage_limit_reached", "insufficient_quota")
# Google's error `status` for an HTTP status (google.rpc.Code's mapping).
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
}
# The HTTP status of the gateway's own errors, by kind, for the Gemini shape's `code`.
_KIND_CODES = {
    "request_too_large": 413,
    "not_found_error": 404,
    "authentication_error": 401,
    "rate_limit_error": 429,
}
_GOOGLE_TYPES = "type.googleapis.com/google.rpc."


def retry_wait(
    status: int | None,
    headers: Mapping[str, str],
    body: bytes,
    attempt: int,
    waited: float,
    now: float | None = None,
) -> float | None:
    """Seconds to wait before trying again an answer of `status` (None: a connection that
    failed before answering), the `attempt`th failure (1, 2, ...) after `waited` seconds of
    waiting so far; None: give the client this answer (or the failure) as it is. `headers`
    are lower-cased."""
    if status is not None and status not in RETRIED_STATUSES:
        return None
    if headers.get("x-should-retry", "").lower() == "false":
        return None
    if status == 429 and _spent_window(headers, body):
        return None
    wait = _retry_after(headers, time.time() if now is None else now)
    if wait is None:
        wait = _google_retry_delay(body)
    if wait is None:
        wait = FIRST_WAIT_SECONDS * 2 ** (attempt - 1)
    wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
    if waited + wait > RETRY_BUDGET_SECONDS:
        return None
    return wait


def _spent_window(headers: Mapping[str, str], body: bytes) -> bool:
    if headers.get("anthropic-ratelimit-unified-status", "").lower() == "rejected":
        return True
    error = _error_of(body)
    if error is None:
        return False
    if any(error.get(key) in NOT_TRANSIENT for key in ("type", "code")):
        return True
    for detail in _google_details(error, "QuotaFailure"):
        violations = detail.get("violations")
        for violation in violations if isinstance(violations, list) else []:
            if isinstance(violation, dict) and "PerDay" in str(violation.get("quotaId", "")):
                return True  # a day's quota (Google's ids: `...PerDayPerProjectPerModel...`)
    return False


def _error_of(body: bytes) -> dict[str, object] | None:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    return error if isinstance(error, dict) else None


def _google_details(error: Mapping[str, object], kind: str) -> list[dict[str, object]]:
    """The error's `details` of google.rpc type `kind` (`RetryInfo`, `QuotaFailure`)."""
    details = error.get("details")
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, dict) and d.get("@type") == _GOOGLE_TYPES + kind]


def _google_retry_delay(body: bytes) -> float | None:
    """Google's `RetryInfo.retryDelay` ("37s", "0.5s") in an error body; None if none."""
    error = _error_of(body)
    for detail in _google_details(error, "RetryInfo") if error else []:
        delay = str(detail.get("retryDelay", ""))
        try:
            return float(delay.removesuffix("s")) if delay.endswith("s") else None
        except ValueError:
            return None
    return None


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    milliseconds = headers.get("retry-after-ms", "")
    if milliseconds:
        try:
            return float(milliseconds) / 1000
        except ValueError:
            pass
    given = headers.get("retry-after", "").strip()
    if not given:
        return None
    try:
        return float(given)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(given)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - now


def error_body(api: str, kind: str, message: str, code: int = 0) -> bytes:
    """An error in the vendor's shape: Anthropic's `{"type": "error", "error": {...}}`,
    OpenAI's `{"error": {...}}` (both its APIs), Google's `{"error": {"code", "message",
    "status"}}` (`code`: the answer's HTTP status; 0: the kind's, else 500)."""
    if api == "generate_content":
        code = code or _KIND_CODES.get(kind, 500)
        status = GOOGLE_STATUS.get(code, "UNKNOWN")
        return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()
    if api == "anthropic":
        value: dict[str, object] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        value = {"error": {"type": kind, "code": kind, "message": message, "param": None}}
    return json.dumps(value).encode()


def unauthorized(api: str) -> tuple[int, list[tuple[str, str]], bytes]:
    kind = "authentication_error" if api == "anthropic" else "invalid_api_key"
    message = "overnight gateway: no valid model token of a running sandbox with a model here"
    return 401, [], error_body(api, kind, message, 401)


def cap_reached(api: str, spent: float, cap: float) -> tuple[int, list[tuple[str, str]], bytes]:
    kind = "rate_limit_error" if api == "anthropic" else "insufficient_quota"
    message = (
        f"overnight gateway: this run's model spend reached its cap (${spent:.2f} of "
        f"${cap:.2f}); a person may raise it (overnight extend RUN_ID --spend USD)"
    )
    headers = [
        ("retry-after", str(CAP_RETRY_AFTER_SECONDS)),
        ("x-should-retry", "false"),
        ("x-overnight-cap", "reached"),
    ]
    return 429, headers, error_body(api, kind, message, 429)
