"""The fake Runtime API's network rules, held to Runtime's docs, through the real SDK.

`GET`/`PUT /v1/sandboxes/{id}/network` and a create's `network` take only the documented shape
(`internet`, `allow`, `deny`, `connect`; each wrong field named in one 400); the rules are kept
per sandbox, never wake it, and `egress_verdict` answers what Runtime's proxy would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import withruntime

from fakes.runtime import FakeRuntime


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    with FakeRuntime.local(tmp_path / "runtime-home") as fake:
        fake.use(monkeypatch, tmp_path / "config")
        yield fake


@pytest_asyncio.fixture
async def rt(fake: FakeRuntime) -> AsyncIterator[withruntime.AsyncRuntime]:
    client = withruntime.AsyncRuntime(timeout=10, max_retries=1, wait_for_capacity=0)
    try:
        yield client
    finally:
        await client.close()


async def new_sandbox(rt: withruntime.AsyncRuntime, **fields: Any) -> withruntime.AsyncSandbox:
    sandbox: withruntime.AsyncSandbox = await rt.sandboxes.create(timeout_seconds=600, **fields)
    return sandbox


async def test_rules_set_at_create_are_kept_per_sandbox_and_read_back(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    narrowed = await new_sandbox(
        rt, network={"internet": True, "allow": ["github.com", "*.pypi.org", "203.0.113.0/24"]}
    )
    default = await new_sandbox(rt)

    read = await narrowed.network.get()
    assert read["internet"] is True
    assert read["allow"] == ["github.com", "*.pypi.org", "203.0.113.0/24"]
    assert read["openPorts"] is True
    assert "updatedAt" in read
    # A create without rules: the public web, every port (a paid sandbox).
    plain = await default.network.get()
    assert (plain["internet"], plain["openPorts"], "allow" in plain) == (True, True, False)
    assert fake.network_rules(narrowed.id)["allow"] == read["allow"]


async def test_a_put_replaces_the_rules_and_internet_off_with_an_allow_list_is_that_list(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt, network={"internet": True, "deny": ["example.com"]})

    answer = await sandbox.network.set(internet=False, allow=["registry.npmjs.org"])

    # The SDK's note: internet=False with allow is allow-list only, stored as internet=True.
    assert answer["internet"] is True
    assert answer["allow"] == ["registry.npmjs.org"]
    assert "deny" not in answer  # replaced whole
    off = await sandbox.network.off()
    assert (off["internet"], off["openPorts"]) == (False, False)
    assert fake.egress_verdict(sandbox.id, "registry.npmjs.org") == "internet-off"


async def test_undocumented_shapes_are_refused_each_field_named(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    with pytest.raises(withruntime.InvalidRequestError) as refused:
        await new_sandbox(
            rt,
            network={
                "internet": "yes",
                "allowlist": ["github.com"],
                "allow": ["*", "https://github.com", "github.com:443", "*.pypi.org"],
                "connect": ["github.com", "github.com:70000", "db.example:5432"],
            },
        )
    assert refused.value.status == 400 and refused.value.code == "invalid_request"
    assert refused.value.details is not None
    assert sorted(refused.value.details["fields"]) == [
        "network.allow[0]",
        "network.allow[1]",
        "network.allow[2]",
        "network.allowlist",
        "network.connect[0]",
        "network.connect[1]",
        "network.internet",
    ]
    assert fake.request_count(route="create", status=201) == 0

    sandbox = await new_sandbox(rt)
    with pytest.raises(withruntime.InvalidRequestError) as put_refused:
        await sandbox.network.set(internet=True, allow=["*"])
    assert put_refused.value.details is not None
    assert put_refused.value.details["fields"] == ["allow[0]"]
    # The rules a refused PUT meant to replace are still there.
    assert "allow" not in await sandbox.network.get()


async def test_rules_change_without_waking_a_paused_sandbox(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(rt)
    await sandbox.pause()

    await sandbox.network.set(internet=True, allow=["github.com"])
    read = await sandbox.network.get()

    assert read["allow"] == ["github.com"]
    assert fake.wakes == []
    assert (await rt.sandboxes.get(sandbox.id)).state == "paused"


async def test_rules_of_an_unknown_sandbox_are_not_found(rt: withruntime.AsyncRuntime) -> None:
    ghost = withruntime.AsyncSandbox(rt.sandboxes._t, {"id": "sbx-nobody"})
    with pytest.raises(withruntime.NotFoundError):
        await ghost.network.get()


async def test_the_verdict_follows_the_documented_rules(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    sandbox = await new_sandbox(
        rt,
        network={
            "internet": True,
            "allow": ["github.com", "*.pypi.org", "140.82.112.0/20", "169.254.169.254"],
            "deny": ["evil.pypi.org"],
            "connect": ["db.example:5432"],
        },
    )
    verdict = fake.egress_verdict
    assert verdict(sandbox.id, "github.com") is None
    assert verdict(sandbox.id, "GitHub.com.") is None
    assert verdict(sandbox.id, "files.pypi.org") is None
    # `*.domain` is every name under it, not the domain itself.
    assert verdict(sandbox.id, "pypi.org") == "rule-not-allowed"
    assert verdict(sandbox.id, "evil.pypi.org") == "rule-not-allowed"  # deny always wins
    assert verdict(sandbox.id, "140.82.112.3") is None
    assert verdict(sandbox.id, "db.example", 5432) is None
    assert verdict(sandbox.id, "db.example", 443) == "rule-not-allowed"
    assert verdict(sandbox.id, "evil.example") == "rule-not-allowed"
    # Private, loopback and metadata addresses are refused whatever the rules allow.
    for address in ("169.254.169.254", "10.0.0.5", "127.0.0.1", "[::1]", "0x7f.1"):
        assert verdict(sandbox.id, address) == "private-address", address
