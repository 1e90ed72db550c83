"""Which of overnight's search attributes the namespace has: asked once per worker process.

Every run needs the answer once, at its start (a run must never upsert an attribute the
namespace lacks: the server would fail its workflow task). Asking the server per run cost a
`ListSearchAttributes` call and an activity round trip each; the answer changes only when an
operator registers attributes, so the worker keeps it for `ttl` seconds and runs started
together share one call. A namespace that may not list them counts as having none; any other
failure is not kept (the activity is retried, and the next run asks again).
"""

from __future__ import annotations

import asyncio
import logging
import time

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES

# How long a worker trusts its answer: attributes registered later reach new runs within this.
TTL_SECONDS = 300.0
_CANNOT_LIST = (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED)
logger = logging.getLogger(__name__)


class SearchAttributeCache:
    """One worker's view of the namespace's search attributes (see the module docstring)."""

    def __init__(self, client: Client | None, *, ttl: float = TTL_SECONDS) -> None:
        self._client = client
        self._ttl = ttl
        self._present: list[str] | None = None
        self._checked_at = 0.0
        self._lock = asyncio.Lock()
        # How many times the server was asked (tests, the benchmark).
        self.lookups = 0

    async def present(self) -> list[str]:
        """overnight's attributes the namespace has registered (none without a client, or
        when the namespace may not list them). Other RPC errors are raised (retried)."""
        if self._client is None:
            return []
        if self._fresh():
            assert self._present is not None
            return list(self._present)
        async with self._lock:
            if not self._fresh():
                found = await self._ask(self._client)
                self._present, self._checked_at = found, time.monotonic()
            assert self._present is not None
            return list(self._present)

    def _fresh(self) -> bool:
        return self._present is not None and time.monotonic() - self._checked_at < self._ttl

    async def _ask(self, client: Client) -> list[str]:
        self.lookups += 1
        request = ListSearchAttributesRequest(namespace=client.namespace)
        try:
            answer = await client.operator_service.list_search_attributes(request)
        except RPCError as error:
            if error.status not in _CANNOT_LIST:
                raise
            # A namespace that may not list them (e.g. a restricted key): set none, run on.
            logger.warning("cannot list search attributes: %s", error.message)
            return []
        registered = set(answer.custom_attributes)
        return [name for name in SEARCH_ATTRIBUTE_TYPES if name in registered]
