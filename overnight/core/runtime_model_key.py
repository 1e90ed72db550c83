"""A run's model key kept out of its Runtime sandboxes by Runtime's egress secrets
(docs/gateway.md "On Runtime"): decided from the spec alone, so the workflow and every
activity decide alike.

What Runtime documents (`withruntime/runtime`, `packages/cloud-guide/docs/security.md`,
"Secrets sandboxes never see"; `api.md`): a secret has a name, a value and the hosts it may
go to (`PUT /v1/egress-secrets/{name}`, `DELETE` to erase it); every sandbox of the account
has an environment variable of the secret's name holding a placeholder (`rtsec_…`); the
proxy on the sandbox's host, outside the guest, replaces the placeholder with the value in
the URL and headers of HTTPS requests to the secret's hosts, and nowhere else. The value
never reaches the sandbox: not its environment, memory or disk.

So a run whose key the local gateway would hold (the same specs: a coding agent whose spec
names its vendor's key variable in `secret_env`, or any spec naming `model_credential`; see
`overnight.core.model_access.model_plan`) stores the key on Runtime as a secret of its own, named
for the run and bound to its model API's host, and its agent reads the placeholder where it
would read the key. A secret per run: a retried store replaces it (same placeholder), and the
run's end deletes it. Not `header`, which would set the key on every request of every sandbox
of the account to that host: two runs with two keys for one host would fight over it.

Only a model API the proxy carries over HTTPS can be given a key this way: plain HTTP never
carries a secret, and the image's `NO_PROXY` (`localhost`, `127.0.0.1`, `::1`, the private
ranges) sends a sandbox straight to those addresses. Such a spec is refused at the run's start
(`copied_key_refusal`), unless it says `model_key_in_sandbox: true`: then its agent gets its key
in its environment, as before (`runtime_key_plan` is None for it).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from overnight.core.agent_kinds import ANY_API_HOST, agent_cli
from overnight.core.model_access import MODEL_TOKEN_ENV, MODEL_URL_ENV, model_plan
from overnight.core.models import RunSpec
from overnight.core.provider_traits import traits

SECRET_PREFIX = "OVERNIGHT_MODEL_KEY_"


@dataclass(frozen=True)
class RuntimeKeyPlan:
    # The worker's variable holding the key: its value goes to Runtime, never to a sandbox.
    credential_env: str
    # The run's egress secret, and the variable holding its placeholder in every sandbox.
    secret_name: str
    # Where Runtime's proxy may put the key: the model API's host.
    hosts: tuple[str, ...]
    # The variable the agent reads its key from, given the placeholder: its CLI's (the
    # vendor's), or OVERNIGHT_MODEL_TOKEN for an agent of one's own.
    key_env: str
    # An agent of one's own: its model API's URL (the spec's `model_base_url`), "" for none.
    model_url: str


def secret_name(run_id: str) -> str:
    """The run's egress secret: an environment variable's name (`run-1` -> `..._RUN_1`), one
    run's alone (a run id has no `_`)."""
    return SECRET_PREFIX + run_id.upper().replace("-", "_")


def runtime_key_plan(spec: RunSpec) -> RuntimeKeyPlan | None:
    """The run's key as a Runtime egress secret; None when its sandboxes get no key this way
    (another provider, or a spec naming no key the gateway would hold)."""
    if not traits(spec.provider).egress_secrets:
        return None
    # The gateway's own rule, asked as if the run were a local isolated one.
    local = model_plan(spec, gateway_reachable=True)
    if local is None:
        return None
    upstream = urlsplit(local.upstream) if local.upstream else None
    if upstream is not None and not through_proxy(upstream.scheme, upstream.hostname or ""):
        return None
    if upstream is not None and upstream.hostname:
        hosts: tuple[str, ...] = (upstream.hostname.lower(),)
    elif spec.agent is not None:
        hosts = agent_cli(spec.agent.kind).api_hosts
    else:
        hosts = ANY_API_HOST  # an agent of one's own may call any kind's vendor
    return RuntimeKeyPlan(
        credential_env=local.credential_env,
        secret_name=secret_name(spec.run_id),
        hosts=hosts,
        key_env=local.token_env or MODEL_TOKEN_ENV,
        model_url="" if spec.agent is not None else local.upstream,
    )


def copied_key_refusal(spec: RunSpec) -> str | None:
    """One line naming the field and the fix when the spec's model key would be copied into
    its Runtime sandboxes (its model API reached over plain HTTP, or at an address Runtime's
    proxy does not carry) and the spec did not ask for that (`model_key_in_sandbox`)."""
    if not traits(spec.provider).egress_secrets or spec.model_key_in_sandbox:
        return None
    local = model_plan(spec, gateway_reachable=True)
    if local is None or not local.upstream:
        return None
    url = urlsplit(local.upstream)
    if through_proxy(url.scheme, url.hostname or ""):
        return None
    field = "agent.base_url" if spec.agent is not None else "model_base_url"
    shown = f"{url.scheme}://{url.hostname or ''}"  # never a password the URL may hold
    why = (
        "is plain HTTP"
        if url.scheme != "https"
        else "is an address Runtime's sandboxes reach directly, not through its proxy"
    )
    return (
        f"field {field}: {shown} {why}, so on Runtime the model key ({local.credential_env}) "
        "would be copied into the sandbox, where the agent can read it (Runtime's egress "
        "secrets reach HTTPS through its proxy only); use an https:// URL at a public name, "
        "or set model_key_in_sandbox: true to copy the key in knowingly"
    )


def through_proxy(scheme: str, host: str) -> bool:
    """Whether Runtime's proxy carries a request to `host` over HTTPS, where it may put a
    secret in: not plain HTTP, not a name or address the image's `NO_PROXY` sends direct."""
    if scheme != "https" or not host or host.lower().rstrip(".") == "localhost":
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return True  # a name: through the proxy
    return not (address.is_loopback or address.is_private or address.is_unspecified)


def held_by_runtime(spec: RunSpec) -> frozenset[str]:
    """The `secret_env` names whose values never enter the run's Runtime sandboxes: the key
    (Runtime holds it), and the variable its placeholder goes in."""
    plan = runtime_key_plan(spec)
    return frozenset() if plan is None else frozenset({plan.credential_env, plan.key_env})


def keyed_env(plan: RuntimeKeyPlan) -> dict[str, str]:
    """What an agent of one's own is told of its model API besides the placeholder."""
    return {MODEL_URL_ENV: plan.model_url} if plan.model_url else {}


def keyed_command(plan: RuntimeKeyPlan, command: str) -> str:
    """`command` with the placeholder Runtime put in `secret_name` given as the agent's key
    (read in the sandbox: the worker never sees it)."""
    return f'export {plan.key_env}="${{{plan.secret_name}-}}"\n{command}'
