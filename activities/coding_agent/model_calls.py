"""A sandbox's model calls through the worker's gateway (overnight/core/model_access.py,
docs/gateway.md): what its agent is given for them at each start, and the cap set again when
the run's spend budget grows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity

from activities.errors import activity_errors
from activities.models import ActivityName, SetModelCapInput
from activities.providers.protocol import ProviderError, SandboxProvider, ServesModels
from overnight.core.model_access import host_cap, model_plan, sandbox_model_env
from overnight.core.models import RunSpec

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]


async def model_wiring(
    provider: SandboxProvider, sandbox_id: str, spec: RunSpec
) -> tuple[dict[str, str], str]:
    """The variables the sandbox's agent gets for its model calls (the gateway's URL and the
    sandbox's token; none when it makes its calls itself) and the base URL its coding agent's
    CLI is pointed at ("": the spec's own). Retryable when the gateway should serve them and
    does not: a start without them would send the CLI to a model API it has no key for."""
    plan = model_plan(spec)
    if plan is None:
        return {}, ""
    endpoint = None
    if isinstance(provider, ServesModels):
        endpoint = await provider.model_endpoint(sandbox_id)
    if endpoint is None:
        raise ProviderError(
            f"the worker's gateway serves no model calls to sandbox {sandbox_id} (is the "
            "worker's gateway running?)"
        )
    return sandbox_model_env(plan, endpoint.url, endpoint.token), endpoint.url


class ModelCallActivities:
    def __init__(self, provider: ProviderGetter, host_queue: str | None) -> None:
        self._provider = provider
        self._host_queue = host_queue

    def all(self) -> list[Callable[..., Any]]:
        return [self.set_model_cap]

    @activity.defn(name=ActivityName.SET_MODEL_CAP)
    async def set_model_cap(self, input: SetModelCapInput) -> bool:
        """Cap the sandbox's next model calls at the run's allowance less what its other hosts
        booked; False when its calls do not go through a gateway."""
        provider = await self._provider(input.provider)
        if not isinstance(provider, ServesModels):
            return False
        cap = host_cap(input.model_allowance_usd, input.model_booked_by_host, self._host_queue)
        with activity_errors():
            return await provider.set_model_cap(input.sandbox_id, cap)
