"""The worker's activities, assembled: the composition root of `activities/`.

`WorkerActivities` makes the sandbox activities (`activities.sandbox.activities.SandboxActivities`,
which hold the providers, the grants and the settings every group shares) and builds every
other group on them; `all()` is the list the worker registers (overnight.worker.runner). A
new activity group is added here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from temporalio.client import Client

from activities.admission.activities import AdmissionActivities
from activities.admission.host_check import HostCheckActivities
from activities.coding_agent.model_calls import ModelCallActivities
from activities.delivery.branch_push import BranchPushActivities
from activities.delivery.ci_checks import CiActivities
from activities.delivery.done_checks import DoneCheckActivities
from activities.delivery.done_sandbox import DoneSandboxActivities
from activities.delivery.pull_request import PullRequestActivities
from activities.notify.activities import NotifyActivities
from activities.providers import registry
from activities.providers.protocol import SandboxProvider
from activities.providers.registry import ProviderFactory
from activities.sandbox.activities import SandboxActivities
from activities.sandbox.daily_limit import DailyLimitActivities
from activities.sandbox.kit_requests import KitRequestActivities
from activities.sandbox.snapshots import SnapshotActivities
from activities.workspace.activities import WorkspaceActivities
from overnight.core.admission import AdmissionSettings
from overnight.core.grants import Grants


class WorkerActivities:
    """Every activity group of one worker, on one set of providers; `async with` closes
    them."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        providers: Mapping[str, SandboxProvider] | None = None,
        factories: Mapping[str, ProviderFactory] | None = None,
        heartbeat_seconds: float | None = None,
        grants: Grants | None = None,
        admission: AdmissionSettings | None = None,
        host_queue: str | None = None,
    ):
        """As `SandboxActivities`, which these are handed to."""
        self.sandbox = SandboxActivities(
            client,
            providers=providers,
            factories=factories,
            heartbeat_seconds=heartbeat_seconds,
            grants=grants,
            admission=admission,
            host_queue=host_queue,
        )
        # One per worker: it remembers the hosts it has seen.
        self._host_checks = HostCheckActivities(client)

    @classmethod
    def from_env(
        cls,
        client: Client | None,
        grants: Grants | None = None,
        admission: AdmissionSettings | None = None,
        host_queue: str | None = None,
    ) -> WorkerActivities:
        """The worker's: `local` always, `runtime` built on first use inside the worker's
        event loop (its client belongs to that loop), from the worker's `RUNTIME_API_KEY`."""
        providers, factories = registry.worker_providers()
        return cls(
            client,
            providers=providers,
            factories=factories,
            grants=grants,
            admission=admission,
            host_queue=host_queue,
        )

    @property
    def grants(self) -> Grants:
        return self.sandbox.grants

    @property
    def admission(self) -> AdmissionSettings:
        return self.sandbox.admission

    def all(self) -> list[Callable[..., Any]]:
        """Every activity, each registered under its `ActivityName` name."""
        s = self.sandbox
        provider, beat, client = s.providers.get, s.heartbeat_seconds, s.client
        return [
            *NotifyActivities(client, grants=s.grants).all(),
            *SnapshotActivities(provider, beat).all(),
            *DailyLimitActivities(provider).all(),
            *KitRequestActivities(provider).all(),
            *DoneCheckActivities(provider, beat).all(),
            *DoneSandboxActivities(provider, beat, grants=s.grants, own_ports=s.own_ports).all(),
            *s.lifecycle.all(),
            *ModelCallActivities(provider, s.host_queue).all(),
            *AdmissionActivities(client, s.admission).all(),
            *self._host_checks.all(),
            *WorkspaceActivities(provider, beat).all(),
            *BranchPushActivities(provider, beat).all(),
            *PullRequestActivities().all(),
            *CiActivities().all(),
            *s.own(),
        ]

    async def host_provider(self) -> SandboxProvider | None:
        """This host's provider, whose sandboxes belong to it (None: this worker has none,
        e.g. a benchmark's)."""
        return await self.sandbox.providers.host_provider()

    async def aclose(self) -> None:
        await self.sandbox.aclose()

    async def __aenter__(self) -> WorkerActivities:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
