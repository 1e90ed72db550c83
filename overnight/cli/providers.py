"""The sandbox providers a person's own machine can reach, for `overnight reap`.

The local provider always; Runtime's only when `RUNTIME_API_KEY` is set here (as in the
worker's environment), so reaping on a laptop without a key never fails for want of one.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from activities.providers.protocol import SandboxProvider


@asynccontextmanager
async def open_providers() -> AsyncIterator[dict[str, SandboxProvider]]:
    from activities.providers.local.provider import LocalProvider
    from activities.sandbox import build_runtime_provider

    providers: dict[str, SandboxProvider] = {"local": LocalProvider()}
    if os.environ.get("RUNTIME_API_KEY", "").strip():
        providers["runtime"] = build_runtime_provider()
    try:
        yield providers
    finally:
        for provider in providers.values():
            await provider.aclose()
