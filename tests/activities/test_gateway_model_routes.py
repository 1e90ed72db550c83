"""The gateway's model routes, end to end on the loopback: a real gateway, real HTTP, the fake
model API as the upstream (it speaks both vendors' streams), sandbox records written by hand
as the local engine writes them (`sandboxes/<name>/sandbox.json`, state running, a `model`
entry)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from activities.gateway.service import (
    Gateway,
    model_stats_of,
    model_token,
    redacted_tokens,
    spend_of,
)
from activities.gateway.tokens import model_token_for
from fakes.model_api import FakeModelApi, overloaded, text
from overnight.core.model_prices import DEFAULT_PRICES, Usage, usd_of

KEY_ENV = "OVERNIGHT_TEST_MODEL_KEY"
KEY = "sk-worker-secret-0123456789"
SANDBOX = "run-1-1"
RUN = "run-1"
# A turn of known usage: 120k fresh input, 500k read from the cache, 80k written, 34k out.
TOKENS = {
    "input_tokens": 120_000,
    "output_tokens": 34_000,
    "cache_read_tokens": 500_000,
    "cache_write_tokens": 80_000,
}
ROUTES = {
    "anthropic": ("/model/v1/messages", "claude-sonnet-4-5"),
    "responses": ("/model/v1/responses", "gpt-5"),
    "chat": ("/model/v1/chat/completions", "gpt-5"),
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("OVERNIGHT_MODEL_PRICES", raising=False)
    return tmp_path / "home"


@pytest.fixture
def gateway(home: Path) -> Iterator[Gateway]:
    served = Gateway(home)
    served.start()
    yield served
    served.stop()


@pytest.fixture
def fake() -> Iterator[FakeModelApi]:
    with FakeModelApi([], honour_stream=True) as served:
        yield served


def record(
    home: Path, sandbox: str, upstream: str, *, state: str = "running", cap: float | None = None
) -> None:
    folder = home / "sandboxes" / sandbox
    folder.mkdir(parents=True, exist_ok=True)
    model = {"upstream": upstream, "credential_env": KEY_ENV, "run_id": RUN, "cap_usd": cap}
    (folder / "sandbox.json").write_text(json.dumps({"state": state, "egress": [], "model": model}))


def call(
    gateway: Gateway,
    api: str,
    token: str | None,
    body: dict[str, Any],
    connection: http.client.HTTPConnection | None = None,
) -> tuple[int, dict[str, str], bytes]:
    path = ROUTES[api][0]
    headers = {"content-type": "application/json"}
    if token is not None and api == "anthropic":
        headers |= {"x-api-key": token, "anthropic-version": "2023-06-01"}
    elif token is not None:
        headers["authorization"] = f"Bearer {token}"
    assert gateway.port is not None
    made = connection or http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=60)
    made.request("POST", path, body=json.dumps(body), headers=headers)
    answer = made.getresponse()
    data = answer.read()
    if connection is None:
        made.close()
    return answer.status, {k.lower(): v for k, v in answer.getheaders()}, data


def asked(api: str, streamed: bool, prompt: str = "hello") -> dict[str, Any]:
    model = ROUTES[api][1]
    if api == "responses":
        return {"model": model, "input": prompt, "stream": streamed}
    return {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": prompt}],
        "stream": streamed,
    }


def scripted_usd(api: str) -> float:
    """The turn's usage at the table's price for the route's model, counted by hand."""
    price = DEFAULT_PRICES["claude-sonnet-4" if api == "anthropic" else "gpt-5"]
    if api == "anthropic":
        usage = Usage(
            input_tokens=120_000,
            output_tokens=34_000,
            cache_read_tokens=500_000,
            cache_write_tokens=80_000,
        )
    else:  # OpenAI counts the cache writes as input; reads are its cached tokens
        usage = Usage(input_tokens=200_000, output_tokens=34_000, cache_read_tokens=500_000)
    return usd_of(price, usage)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("api", ["anthropic", "responses", "chat"])
def test_each_route_forwards_with_the_workers_key_and_books_the_scripted_usage(
    home: Path, gateway: Gateway, fake: FakeModelApi, api: str, streamed: bool
) -> None:
    fake.script.extend([text("done", **TOKENS)])
    upstream = fake.openai_base_url if api != "anthropic" else fake.anthropic_base_url
    record(home, SANDBOX, upstream)
    token = model_token(home, SANDBOX)

    status, headers, body = call(gateway, api, token, asked(api, streamed))

    assert status == 200, body
    if streamed:
        assert headers["content-type"].startswith("text/event-stream")
        last = {"anthropic": b"message_stop", "responses": b"response.completed"}
        assert last.get(api, b"data: [DONE]") in body
    else:
        assert json.loads(body)["usage"]
    (seen,) = fake.requests()
    sent = seen.headers
    if api == "anthropic":
        assert sent["x-api-key"] == KEY and "authorization" not in sent
        assert sent["anthropic-version"] == "2023-06-01"
    else:
        assert sent["authorization"] == f"Bearer {KEY}" and "x-api-key" not in sent
    assert token not in json.dumps(sent)
    if api == "chat" and streamed:  # the gateway asked for the usage chunk, which came through
        assert seen.body["stream_options"] == {"include_usage": True}
        assert b'"prompt_tokens":700000' in body
    usd, answers = spend_of(home, RUN)
    assert answers == 1
    assert usd == pytest.approx(scripted_usd(api), abs=1e-9)
    assert round(usd, 2) == {"anthropic": 1.32, "responses": 0.65, "chat": 0.65}[api]
    assert KEY.encode() not in body and KEY not in json.dumps(headers)


def test_the_workers_key_reaches_the_caller_nowhere_even_in_an_error(
    home: Path, gateway: Gateway, fake: FakeModelApi
) -> None:
    fake.script.extend([overloaded(headers={"x-should-retry": "false"})])
    record(home, SANDBOX, fake.anthropic_base_url)
    status, headers, body = call(
        gateway, "anthropic", model_token(home, SANDBOX), asked("anthropic", True)
    )
    assert status == 529
    assert KEY.encode() not in body and KEY not in json.dumps(headers)
    assert spend_of(home, RUN) == (0.0, 0)


@pytest.mark.parametrize(
    "who",
    [
        "no token",
        "a wrong token",
        "a proxy token",
        "another host's token",
        "a stopped sandbox",
        "a sandbox without a model",
    ],
)
def test_a_token_of_no_running_sandbox_with_a_model_is_refused_and_nothing_forwarded(
    home: Path, gateway: Gateway, fake: FakeModelApi, who: str
) -> None:
    fake.script.extend([text("done", **TOKENS)])
    record(
        home,
        SANDBOX,
        fake.anthropic_base_url,
        state="stopped" if who == "a stopped sandbox" else "running",
    )
    token: str | None = model_token(home, SANDBOX)
    if who == "no token":
        token = None
    elif who == "a wrong token":
        token = model_token(home, SANDBOX)[:-4] + "0000"
    elif who == "a proxy token":
        token = redacted_tokens(SANDBOX, home)[0]
    elif who == "another host's token":
        token = model_token_for(b"k" * 32, SANDBOX)
    elif who == "a sandbox without a model":
        folder = home / "sandboxes" / "other-1"
        folder.mkdir(parents=True)
        (folder / "sandbox.json").write_text(json.dumps({"state": "running", "egress": []}))
        token = model_token(home, "other-1")
    for api in ROUTES:
        status, _, body = call(gateway, api, token, asked(api, True))
        assert status == 401, (api, body)
        error = json.loads(body)["error"]
        assert error["type"] == (
            "authentication_error" if api == "anthropic" else "invalid_api_key"
        )
    assert fake.requests() == []
    assert spend_of(home, RUN) == (0.0, 0)


def test_overloaded_twice_then_answered_is_one_answer_to_the_caller_with_the_retries_counted(
    home: Path, gateway: Gateway, fake: FakeModelApi
) -> None:
    fake.script.extend(
        [overloaded(times=2, headers={"retry-after-ms": "20"}), text("done", **TOKENS)]
    )
    record(home, SANDBOX, fake.anthropic_base_url)
    status, _, body = call(
        gateway, "anthropic", model_token(home, SANDBOX), asked("anthropic", True)
    )
    assert status == 200 and b"message_stop" in body
    assert [r.status for r in fake.requests()] == [529, 529, 200]
    assert spend_of(home, RUN) == (pytest.approx(scripted_usd("anthropic")), 1)
    gateway.model_book.flush()
    stats = model_stats_of(home, RUN)
    assert stats["retries"] == 2
    assert stats["last_upstream_error"] == "529 Overloaded" and stats["last_upstream_error_at"] > 0


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_a_run_at_its_cap_is_refused_at_once_as_a_rate_limit_and_nothing_forwarded(
    home: Path, gateway: Gateway, fake: FakeModelApi, api: str
) -> None:
    fake.script.extend([text("done", **TOKENS, times=5)])
    upstream = fake.openai_base_url if api != "anthropic" else fake.anthropic_base_url
    record(home, SANDBOX, upstream, cap=0.5)
    token = model_token(home, SANDBOX)
    assert call(gateway, api, token, asked(api, True))[0] == 200  # under the cap: served

    status, headers, body = call(gateway, api, token, asked(api, True))

    assert status == 429
    assert headers["retry-after"] == "60" and headers["x-should-retry"] == "false"
    error = json.loads(body)["error"]
    assert error["type"] == ("rate_limit_error" if api == "anthropic" else "insufficient_quota")
    assert "cap" in error["message"]
    assert len(fake.requests()) == 1
    assert spend_of(home, RUN)[1] == 1
    gateway.model_book.flush()
    assert model_stats_of(home, RUN)["cap_refusals"] == 1
    # A cap raised in the record lets the next request through.
    record(home, SANDBOX, upstream, cap=5.0)
    assert call(gateway, api, token, asked(api, True))[0] == 200


def test_identical_request_bodies_in_a_row_are_counted(
    home: Path, gateway: Gateway, fake: FakeModelApi
) -> None:
    fake.script.extend([text("done", times=5)])
    record(home, SANDBOX, fake.openai_base_url)
    token = model_token(home, SANDBOX)
    assert gateway.port is not None
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=60)
    for _ in range(3):  # one connection, kept open between requests
        assert call(gateway, "responses", token, asked("responses", False), connection)[0] == 200
    gateway.model_book.flush()
    assert model_stats_of(home, RUN)["repeats"] == 3
    call(gateway, "responses", token, asked("responses", False, "something else"), connection)
    connection.close()
    gateway.model_book.flush()
    assert model_stats_of(home, RUN)["repeats"] == 1
    assert spend_of(home, RUN)[1] == 4
