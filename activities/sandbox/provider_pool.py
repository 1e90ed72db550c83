"""The worker's sandbox providers, by name: those it was given, and those built on first use
from their factories (`activities.providers.registry`), inside the worker's event loop (a
Runtime client belongs to that loop). Every activity group reaches a provider through
`ProviderPool.get`; a provider that fails to build becomes an activity error there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from activities.errors import ErrorType, activity_errors, non_retryable
from activities.providers.protocol import SandboxProvider
from activities.providers.registry import ProviderFactory
from overnight.core.provider_traits import traits


class ProviderPool:
    """Providers by name, each built once; `aclose` closes those built or given."""

    def __init__(
        self,
        providers: Mapping[str, SandboxProvider] | None = None,
        factories: Mapping[str, ProviderFactory] | None = None,
    ) -> None:
        self._providers: dict[str, SandboxProvider] = dict(providers or {})
        self._factories = dict(factories or {})
        self._building = asyncio.Lock()

    async def get(self, name: str) -> SandboxProvider:
        provider = self._providers.get(name)
        if provider is not None:
            return provider
        async with self._building:
            if name not in self._providers:
                factory = self._factories.get(name)
                if factory is None:
                    raise non_retryable(ErrorType.INVALID_REQUEST, f"no provider {name!r}")
                with activity_errors():
                    self._providers[name] = factory()
            return self._providers[name]

    async def host_provider(self) -> SandboxProvider | None:
        """This host's provider, whose sandboxes belong to it (None: this worker has none,
        e.g. a benchmark's)."""
        names = [*self._providers, *self._factories]
        own = next((name for name in names if traits(name).host_bound), None)
        return None if own is None else await self.get(own)

    async def holds_work(self, name: str) -> bool:
        """False only for a provider that says its agents are virtual (`holds_no_work`)."""
        provider = self._providers.get(name)
        if provider is None and name in self._factories:
            try:
                provider = await self.get(name)
            except Exception:
                return True  # the create will say what is wrong with it
        return not getattr(provider, "holds_no_work", False)

    async def aclose(self) -> None:
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await provider.aclose()
