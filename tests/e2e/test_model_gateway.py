"""Model calls through the worker's gateway (issue 49, docs/gateway.md), end to end on the real
dev server, a real worker, bubblewrap sandboxes and the real CLIs against the fake model API:

- a hostile agent (Claude Code's and Codex's own shell) that dumps its environment, every
  process's environment and command line, and greps every file it may read for the key finds
  it nowhere; the run finishes, its model spend the gateway's count of the fake's usage at the
  price table, to the cent;
- an agent of one's own calling the model API from its own code (never reporting usage) with
  `max_spend_usd: 1` is refused at the gateway once $1 is booked, the run pauses it needing
  attention, and `extend --spend 1` lets the same process go on;
- a token after its sandbox stopped, another sandbox's token, and no token are refused at the
  gateway: nothing forwarded, nothing booked.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.gateway import service as gateway_service
from fakes.model_api import FakeModelApi, Shell, text, tools
from fakes.model_api.turns import Answer
from overnight.cli import client as api
from overnight.core.home import overnight_home
from overnight.core.local_services import serve_to_agents
from overnight.core.model_prices import DEFAULT_PRICES, Usage, dearest, price_of, usd_of
from overnight.core.models import BudgetExtension, RunSpec
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.e2e.coding_agent_runs import (
    CREDENTIAL,
    FAKE_KEY,
    SUBSCRIPTION,
    agents_queue,  # noqa: F401 (a fixture)
    claude_code,  # noqa: F401 (a fixture)
    credential,  # noqa: F401 (a fixture)
    kind,  # noqa: F401 (a fixture)
    new_origin,
    run_result,
    sandbox_ids,
    start_coding_run,
    until,
)
from tests.e2e.helpers import agent_pids, wait_for_status
from tests.kinds import facts
from tests.waits import CAP


# Every way an agent reads what it was given: its variables, every process's variables and
# command line, and every file it may read but the CLIs' installs (read-only copies of npm
# packages, which hold no key). The secret is written in two halves, joined only in the
# sandbox's shell (the model's tool call, which the CLI sends back in the next request, must
# not carry it whole), and searched for from a pattern read through a file descriptor (a
# here-string, which bash 5.2 passes through a pipe), never an argument (a grep given it as
# one would find itself in /proc/*/cmdline). No command or process substitution: Gemini CLI
# refuses a shell command holding one.
def dump_script(secret: str) -> str:
    first, second = secret[:7], secret[7:]
    return textwrap.dedent(
        f"""\
        K={first}; K="${{K}}{second}"
        found() {{ grep -c -F -f /dev/fd/3 3<<<"$K"; }}
        printf 'env:'; env | found
        printf 'environ:'; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | found
        printf 'cmdline:'; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | found
        printf 'files:['; grep -r -l -F -f /dev/fd/3 3<<<"$K" /workspace /overnight/session \\
            /overnight/kit /tmp "$HOME" /etc 2>/dev/null | tr '\\n' ' '; echo ']'
        env | grep -E '_(API_KEY|OAUTH_TOKEN|MODEL_TOKEN)=' \\
            | cut -c1-30 | sort
        echo DUMPED"""
    )


DUMP = dump_script(FAKE_KEY)


def _priced(fake: FakeModelApi, script: list[Answer]) -> float:
    """What the fake's answers cost at the worker's price table: each request's model, the
    usage its scripted turn said."""
    usd = 0.0
    for request in fake.requests():
        assert request.turn_index is not None
        turn = script[request.turn_index]
        price = price_of(DEFAULT_PRICES, request.model) or dearest(DEFAULT_PRICES)
        used = Usage(
            input_tokens=getattr(turn, "input_tokens", 0),
            output_tokens=getattr(turn, "output_tokens", 0),
        )
        usd += usd_of(price, used)
    return usd


async def test_a_subscriptions_token_stays_at_the_gateway_too(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "sk-ant-oat01-fake-subscription"
    monkeypatch.setenv(SUBSCRIPTION, token)
    script: list[Answer] = [
        tools(Shell(dump_script(token)), label="dump"),
        text("Nothing to find.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, "gw-sub", credential=SUBSCRIPTION
        )
        result = await run_result(dev_client, spec.run_id)
        requests = fake.requests()

    assert result.outcome == "finished" and result.spend_model_source == "gateway"
    dumped = requests[1].text()
    assert "env:0" in dumped and "environ:0" in dumped and "cmdline:0" in dumped, dumped
    assert "files:[]" in dumped and "OVERNIGHT_MODEL_TOKEN=ovn-" in dumped, dumped
    for request in requests:  # from the gateway, as the CLI's own login would send it
        assert request.headers.get("authorization") == f"Bearer {token}"
        assert token not in json.dumps(request.body)


async def test_a_hostile_cli_finds_the_key_nowhere_and_its_spend_is_counted_at_the_gateway(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    kind: str,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    script: list[Answer] = [
        tools(Shell(DUMP), label="dump"),
        text("Nothing to find.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, f"gw-{kind[:6]}", kind=kind
        )
        result = await run_result(dev_client, spec.run_id)
        status = await api.get_status(dev_client, spec.run_id)
        requests = fake.requests()

    assert (result.outcome, result.attempts) == ("finished", 1)
    dumped = requests[1].text()
    assert "DUMPED" in dumped, dumped[-2000:]
    assert "env:0" in dumped and "environ:0" in dumped and "cmdline:0" in dumped, dumped
    assert "files:[]" in dumped, dumped
    # What it was given instead: the sandbox's token, as its CLI's key and for the kit.
    vendor = facts(kind).credential_env
    assert f"{vendor}=ovn-" in dumped and "OVERNIGHT_MODEL_TOKEN=ovn-" in dumped, dumped
    # Nothing the CLI sent carried the key; every call reached the fake with it, from the
    # gateway.
    for request in requests:
        assert FAKE_KEY not in json.dumps(request.body)
        sent = request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
        sent = sent or request.headers.get("authorization", "")
        assert sent.removeprefix("Bearer ") == FAKE_KEY
    assert status.spend_model_source == "gateway"
    assert status.spend_model_usd == pytest.approx(_priced(fake, script), abs=0.005)
    assert FAKE_KEY not in status.model_dump_json() + result.model_dump_json()


# An agent of one's own that calls the model API from its own code: Anthropic Messages at the
# gateway, one call after another, never reporting what it spends; each answer booked is a
# line in answers.txt, each refusal a line in refused.txt.
OWN_CALLER = textwrap.dedent(
    """\
    import json, os, time, urllib.error, urllib.request

    url = os.environ["OVERNIGHT_MODEL_URL"] + "/v1/messages"
    n = 0
    while True:
        n += 1  # each call its own question: the same one over and over would be a loop
        body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 16,
                           "messages": [{"role": "user", "content": f"hi {n}"}]}).encode()
        request = urllib.request.Request(url, data=body, method="POST", headers={
            "x-api-key": os.environ["OVERNIGHT_MODEL_TOKEN"],
            "anthropic-version": "2023-06-01", "content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()
            name = "answers.txt"
        except urllib.error.HTTPError as error:
            name = f"refused-{error.code}.txt"
        except OSError:
            name = "unreachable.txt"
        with open("/workspace/" + name, "a") as out:
            out.write("x\\n")
        time.sleep(0.2)
    """
)
# Each answer: 100,000 input tokens at Sonnet's $3 per million = $0.30, and 20 out ($0.0003).
ANSWER_USD = 0.3003


def _lines(sandbox_folder: Path, name: str) -> int:
    try:
        return len((sandbox_folder / "workspace" / name).read_text().splitlines())
    except OSError:
        return 0


async def test_an_agents_own_calls_stop_at_the_cap_and_go_on_in_the_same_process_after_extend(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "main.py").write_text(OWN_CALLER)
    run_id, files = new_origin(runs, tmp_path, "gw-own")
    script: list[Answer] = [text("hello", input_tokens=100_000, output_tokens=20)] * 40
    with FakeModelApi(script) as fake:
        serve_to_agents(fake.port)  # the worker in this process vouches for the fake's port
        spec = RunSpec.model_validate(
            {
                "run_id": run_id,
                "repo": str(files.origin),
                "agent_dir": str(agent_dir),
                "command": "python3 /workspace/agent/main.py",
                "model_credential": CREDENTIAL,
                "model_base_url": fake.anthropic_base_url,
                "host_ports": [fake.port],
                "rates": {"vcpu_hour_usd": 0, "gib_hour_usd": 0},
                "budget": {"max_spend_usd": 1},
                "poll_seconds": 1,
                "stall_seconds": 600,
            }
        )
        await api.start_run(dev_client, spec, task_queue=agents_queue)
        held = await wait_for_status(
            dev_client, run_id, lambda s: s.state == "needs_attention", timeout=120
        )
        folder = overnight_home() / "sandboxes" / f"{run_id}-1"
        pids = agent_pids(run_id)
        booked_at_cap = held.spend_model_usd
        answered_at_cap = _lines(folder, "answers.txt")
        await api.extend_budget(dev_client, run_id, BudgetExtension(spend_usd=1))
        again = await wait_for_status(
            dev_client,
            run_id,
            lambda s: s.state == "needs_attention" and s.spend_model_usd > booked_at_cap,
            timeout=120,
        )
        after = _lines(folder, "answers.txt")
        same_pids = agent_pids(run_id)
        forwarded = len(fake.requests())
        await api.cancel_run(dev_client, run_id, "enough")

    assert held.attention_reason is not None and "spend budget" in held.attention_reason
    assert held.spend_model_source == "gateway"
    # Stopped at the gateway by $1 booked: the calls in flight when it was reached at most.
    assert 1.0 <= booked_at_cap <= 1.0 + ANSWER_USD + 1e-6, booked_at_cap
    assert answered_at_cap == round(booked_at_cap / ANSWER_USD)
    assert forwarded == after  # every refused call stopped at the gateway, none forwarded
    assert held.model_calls_capped >= 0
    # The same process went on after the extension, to the new cap.
    assert pids and set(pids) <= set(same_pids)
    assert (again.attempt, again.restarts_used) == (1, 0)
    assert 2.0 <= again.spend_model_usd <= 2.0 + ANSWER_USD + 1e-6
    assert after > answered_at_cap


async def test_a_token_after_its_sandbox_stopped_another_runs_and_none_are_refused(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    kind: str,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    if kind != "claude-code":
        pytest.skip("the gateway's refusals do not depend on the CLI")
    script: list[Answer] = [text("Done.", label="final")]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(dev_client, agents_queue, runs, tmp_path, fake, "gw-tok")
        result = await run_result(dev_client, spec.run_id)
        [sandbox] = await sandbox_ids(spec.run_id)
        home = overnight_home()
        port = gateway_service.live_port(home)
        assert port is not None
        ended_token = gateway_service.model_token(home, sandbox)
        forwarded = len(fake.requests())
        booked = gateway_service.spend_of(home, spec.run_id)
        url = gateway_service.model_url(port) + "/v1/messages"
        tried = []
        for token in (ended_token, gateway_service.model_token(home, "run-other-1"), None):
            tried.append(await asyncio.to_thread(_call, url, token))
        after = len(fake.requests())

    assert result.outcome == "finished"
    assert tried == [401, 401, 401]
    assert after == forwarded  # nothing forwarded
    assert gateway_service.spend_of(home, spec.run_id) == booked  # nothing booked


def _call(url: str, token: str | None) -> int:
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": []}).encode()
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    if token is not None:
        headers["x-api-key"] = token
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=CAP) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


# The model's own shell rewrites the kit's requests file to say nothing was spent, then kills
# overnight's adapter (the bracket keeps the pattern from matching this shell's own line).
UNDO_SPEND = (
    'echo \'{"usage": {"stream": "forged", "usd": 0}}\' > /workspace/.overnight-requests.json; '
    "pkill -9 -f 'kit/coding_agen[t].py'; echo gone"
)


async def test_spend_is_counted_though_the_model_kills_its_adapter_and_rewrites_its_requests(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    kind: str,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    if kind != "claude-code":
        pytest.skip("what the gateway counts does not depend on the CLI")
    costly = 100_000  # input tokens: $0.30 an answer at Sonnet's price
    script: list[Answer] = [
        tools(Shell(UNDO_SPEND), label="undo", input_tokens=costly),
        text("Done.", label="final", input_tokens=costly),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(dev_client, agents_queue, runs, tmp_path, fake, "gw-undo")
        # The tool ran (its output is in the next request, or the adapter died before one).
        await until(lambda: _ran(spec.run_id) or len(fake.requests()) > 1, 120, "the tool ran")
        first = _priced(fake, script[:1]) if len(fake.requests()) == 1 else None
        counted = await wait_for_status(
            dev_client,
            spec.run_id,
            lambda s: s.spend_model_usd >= _priced(fake, script) - 1e-6,
            timeout=120,
        )
        await api.cancel_run(dev_client, spec.run_id, "seen")

    assert counted.spend_model_source == "gateway"
    assert counted.spend_model_usd == pytest.approx(_priced(fake, script), abs=0.005)
    assert first is None or first >= 0.3  # an answer's worth, whatever the file said
    # The agent's own count (the forged file, or nothing) is shown apart, not counted.
    assert counted.spend_model_reported_usd is None or counted.spend_model_reported_usd < 0.3


def _ran(run_id: str) -> bool:
    """The model's shell wrote its forged requests file in the run's first sandbox."""
    found = (
        overnight_home() / "sandboxes" / f"{run_id}-1" / "workspace" / ".overnight-requests.json"
    )
    try:
        return "forged" in found.read_text()
    except OSError:
        return False
