"""A run's model key as a Runtime egress secret (overnight/core/runtime_model_key.py,
docs/gateway.md "On Runtime"): stored before its sandbox is made and before each start of its agent,
the agent's launch made to read the placeholder, and erased at the run's end.

Every step is safe to repeat: a store replaces the run's one secret (its placeholder kept),
an erase of one already gone is no error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from activities.errors import ErrorType, non_retryable
from activities.providers.protocol import AgentLaunch, HoldsEgressSecrets, SandboxProvider
from overnight.core.models import RunSpec
from overnight.core.runtime_model_key import keyed_command, keyed_env, runtime_key_plan


async def hold_model_key(
    provider: SandboxProvider, spec: RunSpec, environ: Mapping[str, str] | None = None
) -> None:
    """The run's key stored as its egress secret, bound to its model API's host; nothing for
    a run whose key is not kept out this way."""
    plan = runtime_key_plan(spec)
    if plan is None:
        return
    if not isinstance(provider, HoldsEgressSecrets):
        # Never copied in instead: the agent would hold the key the spec means to keep out.
        raise non_retryable(
            ErrorType.INVALID_REQUEST,
            f"provider {spec.provider!r} cannot hold the run's model key out of its sandboxes",
        )
    value = (os.environ if environ is None else environ).get(plan.credential_env)
    if value is None:
        raise non_retryable(
            ErrorType.MISSING_SECRET,
            f"secret variable {plan.credential_env} is not set in the worker's environment",
        )
    await provider.hold_egress_secret(plan.secret_name, value, plan.hosts)


def keyed_launch(spec: RunSpec, launch: AgentLaunch) -> AgentLaunch:
    """The launch with the placeholder as the agent's key (the launch as it was for a run
    whose key is not kept out this way)."""
    plan = runtime_key_plan(spec)
    if plan is None:
        return launch
    env = {k: v for k, v in launch.env.items() if k != plan.key_env} | keyed_env(plan)
    return replace(launch, command=keyed_command(plan, launch.command), env=env)


async def drop_model_key(provider: SandboxProvider, secret: str) -> bool:
    """The run's egress secret erased (the run has ended); False when there was none."""
    if not secret or not isinstance(provider, HoldsEgressSecrets):
        return False
    return await provider.drop_egress_secret(secret)
