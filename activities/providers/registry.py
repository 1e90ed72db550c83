"""The one list of sandbox providers: name -> how to build one, its forensics, what it offers.

The worker (`WorkerActivities.from_env`), the CLI (`reap`, `disk`, `logs`, `inspect`) and the
benchmarks all read providers from here, so a new provider is one package beside `local/`
and `runtime/` plus one entry below. Imports are lazy: the Runtime SDK loads only where a
Runtime provider is used.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeGuard

from activities.providers.disk import ProviderDisk
from activities.providers.forensics import SandboxForensics
from activities.providers.protocol import ProviderError, SandboxProvider
from activities.providers.snapshot_protocol import SnapshotProvider


@dataclass(frozen=True)
class ProviderKind:
    """One provider as the rest of overnight knows it."""

    name: str
    # Builds one; raises a non-retryable `ProviderError` when this machine lacks what it needs.
    build: Callable[[], SandboxProvider]
    # Its forensics companion for one built provider, or None when `provider` is not of this kind.
    forensics: Callable[[SandboxProvider], SandboxForensics | None]
    # Whether this machine is set up for it (a key in the environment, say).
    configured: Callable[[], bool]
    # Built on first use, inside the worker's event loop (its client belongs to that loop).
    lazy: bool
    # Its disk account for one built provider: sandboxes on this machine's disk (local only).
    disk: Callable[[SandboxProvider], ProviderDisk | None] = lambda _provider: None


def _build_local() -> SandboxProvider:
    from activities.providers.local.provider import LocalProvider

    return LocalProvider()


def _local_forensics(provider: SandboxProvider) -> SandboxForensics | None:
    from activities.providers.local.forensics import LocalForensics
    from activities.providers.local.provider import LocalProvider

    return LocalForensics(provider.engine) if isinstance(provider, LocalProvider) else None


def _local_disk(provider: SandboxProvider) -> ProviderDisk | None:
    from activities.providers.local.disk_account import LocalDiskAccount
    from activities.providers.local.provider import LocalProvider

    return LocalDiskAccount(provider.engine) if isinstance(provider, LocalProvider) else None


def _runtime_configured() -> bool:
    return bool(os.environ.get("RUNTIME_API_KEY", "").strip())


def _build_runtime() -> SandboxProvider:
    if not _runtime_configured():
        raise ProviderError(
            "RUNTIME_API_KEY is not set in the worker's environment (needed for provider "
            "'runtime')",
            kind="MissingCredentials",
            retryable=False,
        )
    from activities.providers.runtime.provider import RuntimeProvider

    return RuntimeProvider()


def _runtime_forensics(provider: SandboxProvider) -> SandboxForensics | None:
    from activities.providers.runtime.forensics import RuntimeForensics
    from activities.providers.runtime.provider import RuntimeProvider

    return RuntimeForensics(provider) if isinstance(provider, RuntimeProvider) else None


PROVIDERS: dict[str, ProviderKind] = {
    "local": ProviderKind(
        "local", _build_local, _local_forensics, lambda: True, lazy=False, disk=_local_disk
    ),
    "runtime": ProviderKind(
        "runtime", _build_runtime, _runtime_forensics, _runtime_configured, lazy=True
    ),
}


def provider_names() -> tuple[str, ...]:
    return tuple(PROVIDERS)


def forensics_for(provider: SandboxProvider) -> SandboxForensics | None:
    """The forensics companion of one of overnight's providers; None for any other (a
    benchmark's fake has no output to show)."""
    for kind in PROVIDERS.values():
        found = kind.forensics(provider)
        if found is not None:
            return found
    return None


def disk_for(provider: SandboxProvider) -> ProviderDisk | None:
    """The disk account of one of overnight's providers whose sandboxes are on this machine."""
    for kind in PROVIDERS.values():
        found = kind.disk(provider)
        if found is not None:
            return found
    return None


def supports_snapshots(provider: SandboxProvider) -> TypeGuard[SnapshotProvider]:
    return isinstance(provider, SnapshotProvider)


ProviderFactory = Callable[[], SandboxProvider]


def worker_providers() -> tuple[dict[str, SandboxProvider], dict[str, ProviderFactory]]:
    """What a worker holds: the eager providers built now, the lazy ones as factories."""
    built = {name: kind.build() for name, kind in PROVIDERS.items() if not kind.lazy}
    factories = {name: kind.build for name, kind in PROVIDERS.items() if kind.lazy}
    return built, factories


@asynccontextmanager
async def open_configured() -> AsyncIterator[dict[str, SandboxProvider]]:
    """Every provider this machine is set up for (for `overnight reap`, `logs`, `inspect`):
    Runtime's only where `RUNTIME_API_KEY` is set, so a laptop without a key never fails for
    want of one."""
    providers = {name: kind.build() for name, kind in PROVIDERS.items() if kind.configured()}
    try:
        yield providers
    finally:
        for provider in providers.values():
            await provider.aclose()
