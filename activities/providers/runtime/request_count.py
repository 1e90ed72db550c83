"""Counts the HTTP requests the Runtime SDK sends, by method and answer, for the
`overnight_provider_requests_total` metric (429s are `status="429"`).

The SDK speaks HTTP through its own connection pool (`AsyncHTTP`, a private attribute of
withruntime 0.35's transport, pinned in pyproject). Wrapping its `send` sees every request the
SDK makes, each retry included, and leaves its retries, backoff and idempotency keys as they
are: the wrapper only looks at what comes back.
"""

from __future__ import annotations

from typing import Any

from overnight.core import metrics

PROVIDER = "runtime"


class CountingHTTP:
    """Stands in for the transport's HTTP pool: every `send` is counted, then answered as is."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            response = await self._inner.send(method, *args, **kwargs)
        except Exception:
            # No answer (a dropped connection, a timeout): the SDK retries or raises.
            _count(method, "error")
            raise
        _count(method, str(getattr(response, "status", "unknown")))
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def count_requests(client: Any) -> None:
    """Count the requests `client` (a `withruntime.AsyncRuntime`) sends from now on. A client
    whose insides are not as expected is left alone: no metric is worth a failed call."""
    transport: Any = getattr(client, "_t", None)
    inner = getattr(transport, "_http", None)
    if inner is None or isinstance(inner, CountingHTTP) or not hasattr(inner, "send"):
        return
    transport._http = CountingHTTP(inner)


def _count(method: str, status: str) -> None:
    attributes = {"provider": PROVIDER, "method": method.upper(), "status": status}
    metrics.count_in_activity(metrics.PROVIDER_REQUESTS, attributes)
