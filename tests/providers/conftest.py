"""The `provider` fixture: the shared behaviour suite runs once per provider in `FACTORIES`.

A factory is an async context manager taking a fresh state folder and yielding a `Harness`:
the provider under test, plus the local engine whose files back it (the `local` provider's
own; for `runtime`, the one behind the loopback fake). Tests act through `provider` only and
use `engine` just to look behind its back (a file's bytes, whether an agent still makes
progress), which a paused Runtime sandbox could not tell without waking.

To add a provider: write a factory and add it to `FACTORIES`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from tests.providers.runtime_factory import runtime_harness


@dataclass(frozen=True)
class Harness:
    name: str
    provider: SandboxProvider
    engine: LocalEngine

    def host_path(self, sandbox_id: str, path: str) -> Path:
        """Where a sandbox path really is, to look at it without the provider."""
        return self.engine.host_path(sandbox_id, path)

    def end_lease_in(self, sandbox_id: str, seconds: float) -> None:
        """Let time pass: the sandbox's lease now ends in `seconds` (whatever was asked)."""
        self.engine.set_lease_end(sandbox_id, time.time() + seconds)


ProviderFactory = Callable[[Path], AbstractAsyncContextManager[Harness]]


@asynccontextmanager
async def local_harness(home: Path) -> AsyncIterator[Harness]:
    engine = LocalEngine(home)
    yield Harness("local", LocalProvider(engine), engine)


FACTORIES: dict[str, ProviderFactory] = {"local": local_harness, "runtime": runtime_harness}


@pytest.fixture(params=sorted(FACTORIES))
async def provider(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    async with FACTORIES[request.param](tmp_path / "overnight-home") as harness:
        try:
            yield harness
        finally:
            # Leave no agent running, whatever the test did.
            for info in await harness.provider.list({}, include_stopped=False):
                await harness.provider.stop(info.sandbox_id)
            await harness.provider.aclose()
