"""The `runtime` entry of the shared behaviour suite: `RuntimeProvider` through the real SDK,
against the loopback fake Runtime API, whose sandboxes live in a local engine under `home`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from activities.providers.local.engine import LocalEngine
from activities.providers.runtime.provider import RuntimeProvider
from fakes.runtime import FakeRuntime

if TYPE_CHECKING:
    from tests.providers.conftest import Harness


@asynccontextmanager
async def runtime_harness(home: Path) -> AsyncIterator[Harness]:
    from tests.providers.conftest import Harness  # late: the conftest imports this module

    with pytest.MonkeyPatch.context() as env:
        async with FakeRuntime.local(home) as fake:
            fake.use(env, home.parent / "runtime-config")
            provider = RuntimeProvider(timeout_seconds=10, max_retries=2, call_budget_seconds=60)
            try:
                # The fake's engine keeps its state in files under `home`: this one sees it too.
                yield Harness("runtime", provider, LocalEngine(home))
            finally:
                await provider.aclose()
