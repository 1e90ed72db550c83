"""A run's allow-list on Runtime: the `runtime` provider sets it as the sandbox's network rules,
through the real `withruntime` SDK, read back from the loopback fake API (held to Runtime's
docs: `fakes/runtime/network_rules.py`).

The rules travel with every create (from a snapshot too), a sandbox met by name is given them
again, an open network is the public web with no allow-list, and refusals are not counted:
Runtime tells them only to the program refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import withruntime

from activities.providers.protocol import CountsRefusals, SandboxRequest
from activities.providers.runtime.provider import RuntimeProvider
from fakes.runtime import FakeRuntime
from overnight.core.constants import LABEL_ATTEMPT, LABEL_RUN
from overnight.core.grants import Grants, allowed_names
from overnight.core.models import RunSpec

REPO = "https://github.com/acme/app.git"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home") as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


@pytest_asyncio.fixture
async def provider(fake: FakeRuntime) -> AsyncIterator[RuntimeProvider]:
    provider = RuntimeProvider(timeout_seconds=5, max_retries=2, call_budget_seconds=20)
    try:
        yield provider
    finally:
        await provider.aclose()


def run_spec(**fields: object) -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": "net",
            "repo": REPO,
            "provider": "runtime",
            "agent": {"kind": "claude-code", "prompt": "Make the tests pass"},
        }
        | fields
    )


def request_for(spec: RunSpec, attempt: int = 1) -> SandboxRequest:
    """What the create activity asks for (activities/sandbox/activities.py), network included (under
    a worker granting the default list)."""
    return SandboxRequest(
        name=f"{spec.run_id}-{attempt}",
        labels={LABEL_RUN: spec.run_id, LABEL_ATTEMPT: str(attempt)},
        timeout_seconds=600,
        vcpu=2,
        memory_mib=2048,
        egress=allowed_names(spec, Grants()),
    )


def create_bodies(fake: FakeRuntime) -> list[dict[str, object]]:
    return [r.json() for r in fake.requests("POST", r"^/v1/sandboxes$")]


async def test_a_runs_create_sets_its_allow_list_as_the_sandboxes_network_rules(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    spec = run_spec(egress=["*.pypi.org", "registry.npmjs.org"])

    info, created = await provider.get_or_create(request_for(spec))

    allow = ["*.pypi.org", "registry.npmjs.org", "github.com", "api.anthropic.com"]
    assert created
    [body] = create_bodies(fake)
    assert body["network"] == {"internet": True, "allow": allow}
    rules = fake.network_rules(info.sandbox_id)
    assert (rules["internet"], rules["allow"]) == (True, allow)
    # What Runtime's proxy would then answer the agent.
    verdict = fake.egress_verdict
    assert verdict(info.sandbox_id, "github.com") is None
    assert verdict(info.sandbox_id, "files.pypi.org") is None
    assert verdict(info.sandbox_id, "api.anthropic.com") is None
    assert verdict(info.sandbox_id, "evil.example") == "rule-not-allowed"
    assert verdict(info.sandbox_id, "pypi.org") == "rule-not-allowed"
    assert verdict(info.sandbox_id, "169.254.169.254", 80) == "private-address"
    # Set with the create: no request of its own.
    assert fake.request_count(route="network_set") == 0


async def test_an_open_network_is_the_public_web_with_no_allow_list(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    info, _ = await provider.get_or_create(request_for(run_spec(network="open")))

    [body] = create_bodies(fake)
    assert body["network"] == {"internet": True}
    rules = fake.network_rules(info.sandbox_id)
    assert (rules["internet"], rules["openPorts"], "allow" in rules) == (True, True, False)
    assert fake.egress_verdict(info.sandbox_id, "evil.example") is None
    # Runtime's own refusal, whatever the rules: the metadata service, private networks.
    assert fake.egress_verdict(info.sandbox_id, "169.254.169.254", 80) == "private-address"
    assert fake.egress_verdict(info.sandbox_id, "10.0.0.1") == "private-address"


async def test_a_request_without_an_allow_list_sends_no_rules(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    plain = dataclasses.replace(request_for(run_spec()), egress=None)
    await provider.get_or_create(plain)
    [body] = create_bodies(fake)
    assert "network" not in body


async def test_a_sandbox_made_from_a_snapshot_gets_the_rules_again(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    spec = run_spec(egress=["registry.npmjs.org"])
    first, _ = await provider.get_or_create(request_for(spec, 1))
    await provider.pause(first.sandbox_id)
    snap = await provider.snapshot(
        first.sandbox_id, name="net-keep", mode="disk", labels={LABEL_RUN: "net"}, retention_days=1
    )
    assert snap.state == "ready"

    copy = dataclasses.replace(request_for(spec, 2), snapshot_id=snap.snapshot_id)
    second, _ = await provider.get_or_create(copy)

    body = create_bodies(fake)[-1]
    assert body["snapshot"] == snap.snapshot_id
    assert body["network"] == {
        "internet": True,
        "allow": ["registry.npmjs.org", "github.com", "api.anthropic.com"],
    }
    assert fake.network_rules(second.sandbox_id)["allow"] == body["network"]["allow"]  # type: ignore[index]


async def test_a_sandbox_met_by_name_is_given_the_runs_rules_again(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    spec = run_spec(egress=["registry.npmjs.org"])
    # Made by name with no rules (a worker from before, or by hand): it reaches everything.
    async with withruntime.AsyncRuntime(timeout=10, max_retries=1, wait_for_capacity=0) as rt:
        made = await rt.sandboxes.create(name="net-1", timeout_seconds=600)
    assert "allow" not in fake.network_rules(made.id)

    info, created = await provider.get_or_create(request_for(spec))

    assert (info.sandbox_id, created) == (made.id, False)
    rules = fake.network_rules(made.id)
    assert rules["allow"] == ["registry.npmjs.org", "github.com", "api.anthropic.com"]
    assert fake.egress_verdict(made.id, "evil.example") == "rule-not-allowed"
    assert fake.request_count(route="network_set") == 1


async def test_refusals_are_not_counted_on_runtime_and_asking_costs_no_request(
    fake: FakeRuntime, provider: RuntimeProvider
) -> None:
    info, _ = await provider.get_or_create(request_for(run_spec()))
    asked_before = len(fake.requests())

    assert isinstance(provider, CountsRefusals)
    assert await provider.egress_refusals(info.sandbox_id) == {}
    assert len(fake.requests()) == asked_before
