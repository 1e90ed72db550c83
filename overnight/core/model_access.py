"""Which of a run's model calls go through the worker's gateway, with which key, to where
(docs/gateway.md): decided from the spec alone, so every activity decides alike.

A coding agent's calls go through it when its spec names its vendor's key variable in
`secret_env` (as the docs always said to) or names a `model_credential`; an agent of one's own
when it names a `model_credential`. Only local isolated sandboxes reach a gateway; the rest call
their model API themselves, with the key in their environment, as before.

The sandbox then gets a token of its own instead of the key: in `OVERNIGHT_MODEL_TOKEN`, with
the gateway's URL in `OVERNIGHT_MODEL_URL`, and for a coding agent as its CLI's API key (its
vendor's variable), the gateway as its base URL. The key's variable is never copied in, even
when `secret_env` names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from overnight.core.agent_kinds import agent_cli
from overnight.core.models import RunSpec
from overnight.core.provider_traits import traits

MODEL_URL_ENV = "OVERNIGHT_MODEL_URL"
MODEL_TOKEN_ENV = "OVERNIGHT_MODEL_TOKEN"


@dataclass(frozen=True)
class ModelPlan:
    # The worker's variable holding the key, added at the gateway.
    credential_env: str
    # Where the gateway sends the calls ("": the vendor's own, by route).
    upstream: str
    # The sandbox's variable that gets the token as its CLI's API key ("": an agent of one's
    # own, which reads OVERNIGHT_MODEL_TOKEN).
    token_env: str
    # How the gateway sends the key upstream on the Messages route ("x-api-key", "bearer").
    credential_header: str = "x-api-key"


def model_plan(spec: RunSpec, *, gateway_reachable: bool = False) -> ModelPlan | None:
    """The run's model calls through the gateway; None when its sandboxes make them
    themselves (no key named for the gateway, or a sandbox that reaches none).
    `gateway_reachable`: asked as if its sandboxes reached one (a provider's egress proxy
    holding the key in the gateway's place follows the gateway's rule)."""
    reaches = traits(spec.provider).reaches_worker_loopback and spec.isolation == "bubblewrap"
    if not (reaches or gateway_reachable):
        return None
    if spec.agent is not None:
        # The key its CLI reads from its environment (`AgentCli.key_env`).
        cli = agent_cli(spec.agent.kind)
        vendor = cli.key_env
        credential = spec.model_credential or (vendor if vendor in spec.secret_env else "")
        if credential:
            return ModelPlan(credential, spec.agent.base_url, vendor)
        # A subscription's OAuth token (or a bearer token): kept at the gateway too, the CLI
        # given the sandbox's token in its place, sent as a bearer token both ways.
        bearer = next((n for n in cli.bearer_envs if n in spec.secret_env), "")
        if bearer:
            return ModelPlan(bearer, spec.agent.base_url, bearer, "bearer")
        return None
    if not spec.model_credential:
        return None
    return ModelPlan(spec.model_credential, spec.model_base_url, "")


def kept_out(spec: RunSpec) -> frozenset[str]:
    """The `secret_env` names whose values never enter the sandbox: the gateway holds them."""
    plan = model_plan(spec)
    return frozenset() if plan is None else frozenset({plan.credential_env})


def sandbox_model_env(plan: ModelPlan, url: str, token: str) -> dict[str, str]:
    """What the sandbox's agent is given for its model calls: the gateway's URL and the token,
    and for a coding agent the token as its CLI's key."""
    env = {MODEL_URL_ENV: url, MODEL_TOKEN_ENV: token}
    if plan.token_env:
        env[plan.token_env] = token
    return env


def host_cap(
    allowance_usd: float | None, booked_by_host: Mapping[str, float], own_host: str | None
) -> float | None:
    """The cap a host's gateway holds its books of the run to: the run's allowance for model
    calls (its spend budget less what its sandboxes cost; None: no budget) less what the
    gateways of its other hosts booked. A host's books are its own, so nothing booked on
    this one is counted twice however late the run last read them."""
    if allowance_usd is None:
        return None
    elsewhere = sum(usd for host, usd in booked_by_host.items() if host and host != own_host)
    return round(max(0.0, allowance_usd - elsewhere), 6)
