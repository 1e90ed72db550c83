"""The fake Runtime API's egress secrets, held to Runtime's `security.md` ("Secrets sandboxes
never see"), through the real SDK and from inside a real sandbox of the fake.

- `PUT /v1/egress-secrets/{name}` stores a name, a value and its hosts; no answer or list
  holds the value; replacing keeps the placeholder; `DELETE` erases it; wrong fields are named.
- Every sandbox has the secret's name as a variable holding the placeholder, never the value;
  the proxy puts the value in, in the headers of HTTPS requests to the secret's hosts only:
  a request to another host, or over plain HTTP, carries the placeholder as sent.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import withruntime

from fakes.model_api import FakeModelApi, text
from fakes.runtime import FakeRuntime
from fakes.tls import CertAuthority

KEY = "sk-egress-secret-value-0123456789"


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


async def test_a_secret_is_stored_replaced_listed_and_deleted_without_its_value(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    stored = await rt.secrets.set("MODEL_KEY", value=KEY, hosts=["api.example.test"])
    again = await rt.secrets.set("MODEL_KEY", value=KEY + "2", hosts=["api.example.test"])
    listed = await rt.secrets.list()

    assert stored["placeholder"].startswith("rtsec_")
    assert again["placeholder"] == stored["placeholder"]  # replacing keeps it
    assert [s["name"] for s in listed] == ["MODEL_KEY"]
    assert KEY not in json.dumps([stored, again, listed])
    assert [s.value for s in fake.egress_secrets()] == [KEY + "2"]

    with pytest.raises(withruntime.InvalidRequestError) as refused:
        await rt.secrets.set("model-key", value=KEY, hosts=["API.example.test", "a b"])
    assert {"name", "hosts"} <= set(refused.value.details["fields"])
    with pytest.raises(withruntime.InvalidRequestError) as not_faked:
        await rt.secrets.set("X", value=KEY, hosts=["h.test"], rules=[{"paths": ["/v1/*"]}])
    assert not_faked.value.details["fields"] == ["rules"]
    assert KEY not in str(refused.value) + str(not_faked.value)

    # Deleted with the documented route only (the SDK's `delete` also asks for jobs' copies).
    transport = rt.secrets._t
    assert (await transport.json("DELETE", "/v1/egress-secrets/MODEL_KEY"))["deleted"] is True
    with pytest.raises(withruntime.NotFoundError):
        await transport.json("DELETE", "/v1/egress-secrets/MODEL_KEY")
    assert await rt.secrets.list() == [] and fake.egress_secrets() == []


PROBE = r"""
import json, os, urllib.request
placeholder = os.environ["MODEL_KEY"]
seen = {"env_has_value": any(%(key)r in v for v in os.environ.values()), "placeholder": placeholder}
for name, url in %(urls)r.items():
    request = urllib.request.Request(url, data=b'{"model": "m", "messages": []}', method="POST",
        headers={"x-api-key": placeholder, "content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        seen[name] = answer.status
print(json.dumps(seen))
"""


async def test_the_proxy_puts_the_value_into_https_requests_to_the_secrets_hosts_only(
    fake: FakeRuntime, rt: withruntime.AsyncRuntime
) -> None:
    public = CertAuthority("the public web")
    fake.trust(public.pem)
    bound = FakeModelApi([text("ok")], tls=public.server_context("api.example.test"))
    other = FakeModelApi([text("ok")], tls=public.server_context("other.example.test"))
    plain = FakeModelApi([text("ok")])
    with bound, other, plain:
        fake.reach("api.example.test", bound.port)
        fake.reach("other.example.test", other.port)
        fake.reach("plain.example.test", plain.port)
        hosts = ["api.example.test", "plain.example.test"]
        await rt.secrets.set("MODEL_KEY", value=KEY, hosts=hosts)
        sandbox = await rt.sandboxes.create(timeout_seconds=600)
        urls = {
            "bound": "https://api.example.test/v1/messages",
            "other": "https://other.example.test/v1/messages",
            "plain": "http://plain.example.test/v1/messages",
        }
        probe = PROBE % {"key": KEY, "urls": urls}
        ran = await sandbox.exec(f"python3 -c {shlex.quote(probe)}")
        assert ran.exit_code == 0, ran.stderr
        seen = json.loads(ran.stdout)
        got = {
            name: [r.headers.get("x-api-key") for r in api.requests()]
            for name, api in (("bound", bound), ("other", other), ("plain", plain))
        }

    placeholder = seen["placeholder"]
    assert placeholder.startswith("rtsec_") and seen["env_has_value"] is False
    assert (seen["bound"], seen["other"], seen["plain"]) == (200, 200, 200)
    assert got == {"bound": [KEY], "other": [placeholder], "plain": [placeholder]}
