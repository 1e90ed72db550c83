"""What goes wrong in a coding agent's run, through real runs: the dev server, a worker in this
process, the local provider's bubblewrap sandboxes and the real pinned Claude Code CLI, run by
overnight's adapter against the scripted fake model API (fakes/model_api). Each failure is
checked through the client (status, result, answer, extend_budget) and the fake's request log:

- the CLI SIGKILLed during a tool call: the same session goes on in the same sandbox;
- the sandbox lost: a fresh sandbox resumes the same session;
- 529s past the CLI's own retries: waited out in the same session, no restart;
- a usage limit with a reset time: the run paused until then (wait hours, not run hours);
- the same tool call over and over: one restart named by the loop;
- spend past the budget: paused; `extend_budget` wakes the same CLI process;
- `ask_person` through MCP: `waiting_for_answer`, then the answer in the model's next request;
- a credential the worker lacks, an unreachable `base_url`: one line, nothing started twice.

The adapter-level cases (tests/agent_clis/test_coding_agent.py) check the adapter's own
steps; these check what the supervisor makes of them.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.providers.local.provider import LocalProvider
from fakes.model_api import (
    FakeModelApi,
    McpTool,
    Shell,
    carries,
    overloaded,
    text,
    tools,
    usage_limit,
)
from fakes.model_api.turns import Answer
from overnight.cli import client as api
from overnight.core.grants import SPEC_REFUSED
from overnight.core.models import BudgetExtension, RunStatus
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.e2e.coding_agent_runs import (
    CREDENTIAL,
    SUBSCRIPTION,
    agents_queue,  # noqa: F401 (a fixture)
    claude_code,  # noqa: F401 (a fixture)
    cli_pids,
    credential,  # noqa: F401 (a fixture)
    fake_wait,
    kind,  # noqa: F401 (a fixture)
    named_pids,
    run_result,
    sandbox_ids,
    session_mentions,
    start_coding_run,
    until,
)
from tests.e2e.counting import sandbox_state
from tests.e2e.helpers import agent_pids, wait_for_status
from tests.kinds import facts
from workflows.pure.kit_requests import LEAST_PAUSE

RESULT_TIMEOUT = 240  # a cap on the wait (one run takes 10-40 s here; a loaded full run, over 120)
# What the adapter's seeded prompt says (a new session after a loop, a lost transcript).
SEEDED = "This task was begun in an earlier session"


# ----- the CLI killed, the sandbox lost -----


async def test_the_cli_sigkilled_during_a_tool_call_goes_on_in_the_same_session(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    kind: str,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    script: list[Answer] = [
        tools(Shell("echo first >> first.txt"), label="first"),
        tools(Shell("echo started > started.txt && exec sleep 30"), label="sleep"),
        text("Resumed; done.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, files = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, "kill-cli", kind=kind
        )
        answered = await fake_wait(fake.wait_for_answers, 2, timeout=60)
        sleep_call = answered[1].call_ids[0]
        [sandbox] = await sandbox_ids(spec.run_id)

        # The call running, and in the session file: a resume finds it there (a kind that
        # records a call only when it ends has nothing to wait for).
        def mentions(text: str) -> bool:
            return session_mentions(sandbox, text, kind)

        def running() -> bool:
            in_session = facts(kind).call_in_session(mentions, sleep_call)
            return bool(named_pids(spec.run_id, "sleep")) and in_session

        await until(running, what="the sleep call running and in the session file")
        [pid] = cli_pids(spec.run_id, kind)
        os.kill(pid, signal.SIGKILL)
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        requests = fake.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert await sandbox_ids(spec.run_id) == [sandbox]  # no new sandbox
    assert fake.session_ids() == [requests[0].session_id]  # the same session throughout
    assert [r.label for r in requests] == ["first", "sleep", "final"]  # no model turn redone
    facts(kind).resumed_after_kill(requests[2], requests[0].call_ids[0], sleep_call)
    # No tool call done twice: the first call's file has its one line on the run's branch.
    assert _origin_file(files.origin, spec.branch, "first.txt") == "first\n"
    assert "crashed (killed by signal 9" in (result.checkpoint or "")


async def test_a_lost_sandbox_is_replaced_by_one_that_resumes_the_same_session(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    script: list[Answer] = [
        tools(Shell("echo one > one.txt"), label="one"),
        tools(Shell("echo started > started.txt && exec sleep 30"), label="sleep"),
        text("Done in the second sandbox.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, files = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, "lost-box"
        )
        await fake_wait(fake.wait_for_answers, 2, timeout=60)
        [first] = await sandbox_ids(spec.run_id)
        await until(lambda: named_pids(spec.run_id, "sleep"), what="the sleep call running")
        # The supervisor holds the checkpoint of step 1 (what a new sandbox starts from).
        await wait_for_status(dev_client, spec.run_id, lambda s: "echo started" in _next(s), 180)
        await LocalProvider().stop(first)  # the sandbox lost, its processes with it
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        status = await api.get_status(dev_client, spec.run_id)
        requests = fake.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
    sandboxes = await sandbox_ids(spec.run_id)
    assert len(sandboxes) == 2 and sandboxes[0] == first
    print(f"\nrestart: {status.restarts[0].reason}")
    # The new sandbox restored the transcript from the session store and resumed it.
    assert fake.session_ids() == [requests[0].session_id], result.checkpoint
    assert [r.label for r in requests] == ["one", "sleep", "final"]
    assert requests[-1].result_for(requests[0].call_ids[0]) is not None
    assert "restored from the session store" in (result.checkpoint or "")
    assert _origin_file(files.origin, spec.branch, "one.txt") == "one\n"


# ----- the model API: overloaded, a usage limit -----


async def test_529s_are_retried_at_the_gateway_unseen_by_the_cli_with_no_restart(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    # Overloaded four times, each answer asking for a 0.2 s wait (Anthropic's retry-after-ms).
    quick = {"retry-after-ms": "200"}
    script: list[Answer] = [
        overloaded(times=4, headers=quick),
        tools(Shell("echo hi"), label="hi"),
        text("Done despite the overload.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(dev_client, agents_queue, runs, tmp_path, fake, "overload")
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        status = await api.get_status(dev_client, spec.run_id)
        requests = fake.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    # The gateway asked four more times; the CLI saw none of it (no retry of its own, no
    # backoff of the adapter's).
    assert [r.status for r in requests] == [529, 529, 529, 529, 200, 200]
    assert len(fake.session_ids()) == 1
    assert "after the CLI's own retries" not in (result.checkpoint or "")
    # (The gateway writes its count at most once a second: the status may lag a retry.)
    assert status.model_api is not None and "529" in status.model_api, status.model_api
    assert re.search(r"[1-4] retr(y|ies) at the gateway", status.model_api), status.model_api


@pytest.mark.long
async def test_a_usage_limit_pauses_the_run_until_its_reset_then_the_same_session_goes_on(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A real reset, as short as a pause may be (shorter waits the agent sleeps through:
    # workflows/talk.LEAST_PAUSE), counted from when the CLI first asks (a few seconds in).
    monkeypatch.setenv(SUBSCRIPTION, "sk-ant-oat-fake")  # subscription mode: a reset time
    began = time.monotonic()
    # Counted from the CLI's own question, however late a loaded machine starts it.
    resets_in = LEAST_PAUSE.total_seconds() + 6
    script: list[Answer] = [
        usage_limit(resets_in=resets_in, label="limited"),
        tools(Shell("echo after the reset"), label="after"),
        text("Done after the wait.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, "limit", credential=SUBSCRIPTION
        )
        waiting = await wait_for_status(
            dev_client, spec.run_id, lambda s: bool(s.talk and s.talk.waiting_until), 30
        )
        [sandbox] = await sandbox_ids(spec.run_id)
        # The status says the wait as the run begins it, the pause a moment later.
        engine = LocalProvider().engine
        await until(lambda: sandbox_state(engine, sandbox) == "paused", 60, "paused for the wait")
        asked = len(fake.requests())
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        status = await api.get_status(dev_client, spec.run_id)
        requests = fake.requests()
    elapsed = time.monotonic() - began

    resets_at = int(requests[0].received_at_epoch + resets_in)
    assert waiting.talk is not None and waiting.talk.waiting_until is not None
    assert abs(waiting.talk.waiting_until.timestamp() - resets_at) < 2
    assert "usage limit" in (waiting.talk.waiting_reason or "")
    assert asked == 1  # paused (above), the model not asked meanwhile
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert [r.label for r in requests] == ["limited", "after", "final"]
    assert len(fake.session_ids()) == 1
    # The subscription's token stayed at the gateway: the sandbox's token in its place.
    assert status.spend_model_source == "gateway"
    assert all(r.headers.get("authorization") == "Bearer sk-ant-oat-fake" for r in requests)
    assert requests[1].received_at_epoch >= resets_at - 1  # not before the reset
    # The wait counted as wait hours, not as run hours.
    assert status.wait_hours_used * 3600 >= LEAST_PAUSE.total_seconds() - 5
    assert status.hours_used * 3600 < elapsed - (LEAST_PAUSE.total_seconds() - 5)


# ----- a loop, the spend budget, a question -----


async def test_the_same_tool_call_again_and_again_is_one_restart_named_by_the_loop(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    script: list[Answer] = [
        # The session seeded after the restart finishes; the looping one never sees this.
        text("Done after the loop.", label="final", when=carries(SEEDED)),
        # A model's turn takes a moment (here 0.3 s): the adapter stops the CLI within it
        # after the 8th call. Answered at once, the CLI ran two turns more under load.
        tools(Shell("pytest -q"), times=20, label="again", delay_seconds=0.3),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(dev_client, agents_queue, runs, tmp_path, fake, "loop")
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        status = await api.get_status(dev_client, spec.run_id)
        requests = fake.requests()

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 2, 1)
    [restart] = status.restarts
    assert restart.reason == "agent looped: loop: Bash `pytest -q` 8 times in a row"
    assert status.safety_net is not None and list(status.safety_net.by_cause) == ["looped"]
    assert [r.label for r in requests].count("again") in (8, 9)  # stopped at the 8th
    assert [r.label for r in requests][-1] == "final"
    assert len(fake.session_ids()) == 2  # a new session, seeded from the checkpoint


async def test_spend_past_the_budget_pauses_and_an_extension_wakes_the_same_cli_process(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    costly = 200_000  # input tokens: dollars in Claude Code's estimate, whatever the model
    script: list[Answer] = [
        tools(Shell("echo one"), label="one", input_tokens=costly),
        # Slow enough that the pause finds the CLI waiting on it.
        tools(Shell("echo two"), label="two", delay_seconds=4, input_tokens=costly),
        text("Done within the new budget.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, "spend", budget={"max_spend_usd": 0.05}
        )
        held = await wait_for_status(
            dev_client, spec.run_id, lambda s: s.state == "needs_attention", 180
        )
        [sandbox] = await sandbox_ids(spec.run_id)
        paused = (await LocalProvider().sandbox(sandbox)).state
        [pid] = _adapter_pids(spec.run_id)
        await api.extend_budget(dev_client, spec.run_id, BudgetExtension(spend_usd=500))
        await fake_wait(fake.wait_for_requests, 3, timeout=60)
        still = _adapter_pids(spec.run_id)
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        requests = fake.requests()

    assert "spend" in (held.attention_reason or ""), held.attention_reason
    # Counted at the gateway: the first answer's 200,000 tokens at the price table.
    assert held.spend_model_source == "gateway"
    assert held.spend_model_usd > 0.05 and paused == "paused"
    # The same adapter went on after the extension, in the same session (the CLI's next call,
    # when it came before the pause, was refused at the gateway's cap and the CLI exited on it).
    assert still == [pid]
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    assert [r.label for r in requests] == ["one", "two", "final"]
    assert len(fake.session_ids()) == 1


def _adapter_pids(run_id: str) -> list[int]:
    """The run's live adapter processes (overnight's, which runs the CLI). A process the
    adapter is starting (git, the CLI) shows the adapter's command line until it executes its
    own, long enough on a loaded machine to be seen (a CI-form run did): children of an
    adapter are not adapters."""
    found: dict[int, int] = {}  # pid: its parent's
    for pid in agent_pids(run_id):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        script = command.split(b"\0")[1:2]  # python3's first argument (not a shell's -c)
        if script and script[0].endswith(b"/coding_agent.py"):
            found[pid] = int(stat.rpartition(")")[2].split()[1])  # after the name: state, ppid
    return [pid for pid, parent in found.items() if parent not in found]


async def test_ask_person_through_mcp_waits_for_the_answer_and_the_model_gets_it(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    ask = McpTool("overnight", "ask_person", {"question": "Ship it?", "choices": ["yes", "no"]})
    script: list[Answer] = [tools(ask, label="ask"), text("Shipping.", label="final")]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(dev_client, agents_queue, runs, tmp_path, fake, "ask")
        asking = await wait_for_status(
            dev_client, spec.run_id, lambda s: s.state == "waiting_for_answer", 180
        )
        asked = len(fake.requests())
        said = await api.answer_question(dev_client, spec.run_id, "yes")
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        requests = fake.requests()

    assert asking.talk is not None
    assert (asking.talk.question, asking.talk.choices) == ("Ship it?", ["yes", "no"])
    assert asked == 1 and said.startswith("answered ")  # the model waited for the answer
    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)
    [answered] = requests[-1].last_tool_results()
    assert "yes" in answered.output


# ----- refused at once -----


async def test_a_credential_the_worker_does_not_have_fails_the_run_at_once(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(CREDENTIAL, raising=False)
    with FakeModelApi([text("never asked")]) as fake:
        began = time.monotonic()
        spec, _ = await start_coding_run(dev_client, agents_queue, runs, tmp_path, fake, "no-key")
        caught = await _failed(dev_client, spec.run_id)
        seconds = time.monotonic() - began
        requests = fake.requests()
    assert _refusal(caught) == (
        f"spec: field secret_env: {CREDENTIAL} is not set in this worker's environment "
        "(set it where the worker runs, then start the run again)"
    )
    assert requests == [] and await sandbox_ids(spec.run_id) == []  # nothing started
    assert seconds < 20


async def test_an_unreachable_base_url_fails_the_run_at_once(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
) -> None:
    closed = _closed_port()
    with FakeModelApi([text("never asked")]) as fake:
        began = time.monotonic()
        spec, _ = await start_coding_run(
            dev_client,
            agents_queue,
            runs,
            tmp_path,
            fake,
            "no-api",
            agent={"base_url": f"http://127.0.0.1:{closed}"},
            host_ports=[closed],
        )
        caught = await _failed(dev_client, spec.run_id)
        seconds = time.monotonic() - began
    assert _refusal(caught) == (
        f"spec: field agent.base_url: nothing accepts connections at 127.0.0.1:{closed} from "
        "this worker (Connection refused): start the model API or gateway there, or fix base_url"
    )
    assert await sandbox_ids(spec.run_id) == []  # nothing started
    assert seconds < 20


# ----- helpers -----


async def _failed(client: Client, run_id: str, timeout: float = 20) -> WorkflowFailureError:
    """The run's failure; its status in the assertion when it did not fail in `timeout`."""
    try:
        await asyncio.wait_for(api.wait_result(client, run_id), timeout=timeout)
    except WorkflowFailureError as error:
        return error
    except TimeoutError:
        status = await api.get_status(client, run_id)
        raise AssertionError(f"{run_id} did not fail in {timeout} s: {status}") from None
    raise AssertionError(f"{run_id} did not fail")


def _next(status: RunStatus) -> str:
    summary = status.checkpoint_summary
    return (summary.next if summary is not None else None) or ""


def _refusal(error: WorkflowFailureError) -> str:
    """The one line of a run refused at its start (`SpecRefused`)."""
    cause = error.cause
    assert isinstance(cause, ApplicationError) and cause.type == SPEC_REFUSED, cause
    return cause.message


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _origin_file(origin: Path, branch: str, path: str) -> str:
    import subprocess

    shown = subprocess.run(
        ["git", "-C", str(origin), "show", f"{branch}:{path}"], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout
