"""`overnight demo --agent claude-code|codex`: a real coding agent's CLI as a run's agent,
killed once in the middle of a tool call and resumed in the same session, on the embedded
default; the run ends in a pull request.

What runs is what a person's run would run, with stand-ins for what is not here: the model
and GitHub. The pinned CLI (`bash scripts/install-agent-clis`, which scripts/demo runs
first), overnight's adapter in an isolated local sandbox (bubblewrap), the local dev server
and a worker in this process. The run's origin is a bare repository beside the state dir (as
`overnight demo` makes it), served over smart HTTP as a GitHub repository would be, with a
fake GitHub API beside it (overnight/demo/fake_github.py): the finished run's pull request is
opened there. The model API is the scripted fake of `fakes/model_api`, started by the demo as
its own process on a free loopback port (`python -m fakes.model_api --script FILE --port 0
--log FILE`): its script is a small task of six answers (write greet.py, run it, fix it, a slow
run, the run again, the final word), and its log shows which session each request came from.

The kill (overnight/demo/kill.py): while the CLI runs the script's slow tool call (a
`sleep`), the demo finds the CLI's native binary among the machine's processes and SIGKILLs
it. The adapter sees the CLI die, ends the tool process it left behind and starts the CLI
again on the same session, in the same sandbox: one attempt, no restart. The demo prints the
session id the model API saw before the kill and after it, the attempts and restarts, the
spend, the commits on the run's branch, whether the dev server stopped, and last the pull
request's URL. The origin, the script, the fake's log and the pull request's text stay in
`<OVERNIGHT_HOME>-demo/<run id>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client

from overnight.cli import client as api
from overnight.cli import render
from overnight.core.agent_kinds import agent_cli
from overnight.core.agent_text import terminal_line
from overnight.core.codec import data_converter
from overnight.core.coding_agents import INSTALL_SCRIPT, install_problem
from overnight.core.errors import SpecError
from overnight.core.grants import Grants
from overnight.core.models import RunResult, RunSpec, RunStatus
from overnight.demo.fake_github import (
    demo_github,
    pull_request_fields,
    pull_request_line,
    save_pull_request,
)
from overnight.demo.fake_model import (
    SLOW_CHECK,
    SLOW_PROCESS,
    FakeModelApiProcess,
    start_fake_model_api,
)
from overnight.demo.kill import Kill, kill_during_the_slow_call, sessions_of
from overnight.demo.sample_demo import (
    _follow,
    _wait_ready,
    demo_grants,
    demo_root,
    demo_server,
    kept_server_line,
    make_origin,
)
from overnight.worker.devconfig import DevConfig

KINDS = ("claude-code", "codex")  # what this demo plays (`overnight demo --agent`'s choices)
FAKE_KEY = "sk-demo-fake-model-api"
RESULT_TIMEOUT_SECONDS = 300
PROMPT = (
    "Write greet.py, a script that prints 'Hello, overnight'. Run it, fix what is wrong, "
    "then save its output to greeting.txt."
)


# --- the demo ---


def agent_spec(
    run_id: str,
    kind: str,
    repo: str,
    base_url: str,
    port: int,
    pull_request: dict[str, Any] | None = None,
) -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            # Served over smart HTTP as GitHub serves a repository: the sandbox clones it and
            # pushes each step through the worker's gateway.
            "repo": repo,
            "agent": {"kind": kind, "prompt": PROMPT, "base_url": base_url},
            "secret_env": [agent_cli(kind).key_env],
            # The sandbox's network reaches the worker's loopback only on the fake's port.
            "host_ports": [port],
            "poll_seconds": 1,
            "stall_seconds": 120,
            "sandbox_timeout_seconds": 600,
            "budget": {"max_restarts": 3, "max_hours": 1},
            "pull_request": pull_request,
        }
    )


def new_run_id(kind: str) -> str:
    return f"demo-{kind}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def readiness_problem(kind: str) -> str | None:
    """Why this machine cannot play the demo (one line, with its fix), or None."""
    from activities.providers.local.isolation import bwrap_problem

    problem = bwrap_problem()
    if problem is not None:
        return (
            f"{problem}: coding agents run only in isolated sandboxes: install bubblewrap "
            "(e.g. sudo apt-get install bubblewrap)"
        )
    missing = install_problem(agent_cli(kind), os.uname().machine)
    if missing is not None:
        return missing.replace(f"run {INSTALL_SCRIPT} there", f"run {INSTALL_SCRIPT}")
    return None


@dataclass
class Played:
    """How the run went: the demo's exit code, its pull request, and the Web UI link to print
    after the server's line (`--keep-server`)."""

    code: int
    pull_request_url: str | None = None
    pull_request_record: Path | None = None
    link_after: str | None = None


async def run_agent_demo(
    kind: str = "claude-code",
    *,
    keep_server: bool = False,
    config: DevConfig | None = None,
    out: Callable[[str], None] = print,
    port: int | None = None,
    config_path: Path | None = None,
) -> int:
    """The whole demo; 0 when the run finished in one attempt with no restart, the CLI killed
    once, the same session resumed, and its pull request opened. It ends as `overnight demo`
    does (the dev server stopped and said so, or kept with `--keep-server` and its Web UI link
    printed), and last prints the pull request's URL. The dev server: as `overnight demo`'s."""
    from overnight.worker.runner import serve

    if kind not in KINDS:
        raise SpecError(f"the agent demo plays {', '.join(KINDS)} only, not {kind!r}")
    problem = await asyncio.to_thread(readiness_problem, kind)
    if problem is not None:
        raise SpecError(problem)
    logging.basicConfig(level=logging.WARNING)
    converter = data_converter()
    server = await demo_server(config, config_path, port, out)
    ending = "kept" if keep_server else "stopped" if server.started_here else "reused"
    # The fake accepts any key; the worker keeps this one from its own environment (this
    # process's, for the demo only) at its gateway, as it would a real one.
    credential = agent_cli(kind).key_env
    earlier_key = os.environ.get(credential)
    os.environ[credential] = FAKE_KEY  # this process's only: the worker below copies it
    try:
        client = await Client.connect(
            server.address, namespace=server.namespace, data_converter=converter
        )
        ready, stop = asyncio.Event(), asyncio.Event()
        queue = f"demo-{secrets.token_hex(4)}"
        grants = demo_grants("bubblewrap").merged(Grants(secret_env=(credential,)))
        worker = asyncio.create_task(
            serve(client, task_queue=queue, ready=ready, stop=stop, grants=grants)
        )
        try:
            await _wait_ready(worker, ready)
            ui = server.ui_url if server.config.ui else None
            played = await _agent_run(client, ui, out, queue, kind, ending)
        finally:
            stop.set()
            await asyncio.wait_for(worker, timeout=60)
    finally:
        if earlier_key is None:
            os.environ.pop(credential, None)
        else:
            os.environ[credential] = earlier_key
        if keep_server:
            out(kept_server_line(server))
        else:
            server.stop()
    if played.link_after:
        out(f"Web UI: {played.link_after}")
    out(pull_request_line(played.pull_request_url, played.pull_request_record))
    return played.code


async def _agent_run(
    client: Client,
    ui_base: str | None,
    out: Callable[[str], None],
    queue: str,
    kind: str,
    ending: str,
) -> Played:
    """`ending`: `reused` (a server of someone else's: the link in the report), `stopped`
    (started here and stopped after: said so, no link) or `kept` (the link after the server's
    line)."""
    cli = agent_cli(kind)
    run_id = new_run_id(kind)
    root = demo_root() / run_id
    files = await asyncio.to_thread(make_origin, root)
    fake = await asyncio.to_thread(start_fake_model_api, root)
    try:
        with demo_github(files.origin, owner=run_id, ui_base=ui_base) as github:
            port = int(fake.url.rsplit(":", 1)[1])
            base_url = fake.url if kind == "claude-code" else fake.url + "/v1"
            spec = agent_spec(run_id, kind, github.repo_url, base_url, port, pull_request_fields())
            url = api.web_ui_url(ui_base, client.namespace, run_id) if ui_base else None
            out(f"fake model API at {fake.url} (a script of 6 answers; log: {fake.log})")
            out(f"fake GitHub at {github.github.url}, the run's origin at {github.repo_url}")
            started = time.monotonic()
            await api.start_run(client, spec, task_queue=queue)
            out(
                f"started {run_id}: {cli.kind} {cli.version} (the real CLI) will be killed "
                "during a tool call"
            )
            if url:
                out(f"Web UI: {url}")
            result, kill = await _follow_and_kill(client, run_id, kind, fake, out)
            status = await api.get_status(client, run_id)
            seen = fake.requests()
            pull = github.pull_request()
    finally:
        await asyncio.to_thread(fake.stop)
    seconds = time.monotonic() - started
    record = await asyncio.to_thread(save_pull_request, pull, root) if pull else None
    commits = await asyncio.to_thread(branch_commits, files.origin, spec.branch)
    link = url if ending == "reused" else None
    lines, same = _report(result, status, kill, seen, commits, spec.branch, link, cli.kind)
    out(f"\n{lines[0]} in {seconds:.0f}s")
    for line in lines[1:]:
        out(line)
    if ending == "stopped":
        out("the dev server is stopped now; `--keep-server` leaves it and the Web UI running")
    good = result.outcome == "finished" and (result.attempts, result.restarts) == (1, 0)
    opened = result.pull_request_url is not None
    return Played(
        code=0 if good and kill is not None and same and opened else 1,
        pull_request_url=result.pull_request_url,
        pull_request_record=record,
        link_after=url if ending == "kept" else None,
    )


async def _follow_and_kill(
    client: Client, run_id: str, kind: str, fake: FakeModelApiProcess, out: Callable[[str], None]
) -> tuple[RunResult, Kill | None]:
    """The run followed to its result, its CLI killed once on the way."""
    slow = (SLOW_PROCESS, SLOW_CHECK)
    killing = asyncio.create_task(kill_during_the_slow_call(run_id, kind, fake, slow, out))
    try:
        result = await _follow(client, run_id, out, timeout=RESULT_TIMEOUT_SECONDS)
    finally:
        if not killing.done():
            killing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await killing
    return result, killing.result() if not killing.cancelled() else None


def branch_commits(origin: Path, branch: str) -> list[str]:
    """The commits on the run's branch of the origin beyond main, newest first."""
    done = subprocess.run(
        ["git", "-C", str(origin), "log", "--format=%h %s", f"main..{branch}"],
        capture_output=True,
        text=True,
    )
    return done.stdout.splitlines() if done.returncode == 0 else []


def _report(
    result: RunResult,
    status: RunStatus,
    kill: Kill | None,
    seen: list[dict[str, Any]],
    commits: list[str],
    branch: str,
    url: str | None,
    kind: str = "claude-code",
) -> tuple[list[str], bool]:
    """The report's lines (the first without its time), and whether one session ran it all."""
    first, *rest = render.result_text(result).split("\n")
    lines = [first, *rest]
    same = False
    if kill is None:
        lines.append("the CLI was never killed: it did not reach its slow tool call")
    else:
        after = seen[kill.requests_before :]
        before_ids, after_ids = kill.session_before, sessions_of(after)
        lines += [
            f"session before the kill: {', '.join(before_ids) or '-'} "
            f"(model requests 1-{kill.requests_before})",
            f"session after the kill:  {', '.join(after_ids) or '-'} "
            f"(model requests {kill.requests_before + 1}-{len(seen)})",
        ]
        same = len(before_ids) == 1 and before_ids == after_ids
        lines.append(
            "  the same session, resumed in place"
            if same
            else "  NOT the same session: the CLI did not resume it"
        )
        killed_calls = seen[kill.requests_before - 1]["call_ids"] if kill.requests_before else []
        told = [after[0]["results"].get(call) for call in killed_calls] if after else []
        if told and told[0]:
            lines.append(f"  the killed call's result, as the resumed CLI sent it: {told[0]}")
    lines.append(
        f"attempts: {result.attempts}, restarts: {result.restarts}"
        + (" (the adapter resumed the CLI in its sandbox)" if result.restarts == 0 else "")
    )
    sandbox = max(0.0, result.spend_usd - result.spend_model_usd)
    estimate = "Claude Code's own estimate" if kind == "claude-code" else "estimated"
    lines.append(
        f"spend: ${result.spend_model_usd:.4f} model ({estimate} at list "
        f"prices) + ${sandbox:.4f} sandbox (estimate) = ${result.spend_usd:.4f}"
    )
    lines.append(f"{len(commits)} commits on {branch} (origin):")
    lines += [f"  {commit}" for commit in commits]
    lines += ["timeline:", render.timeline_text(status), "final checkpoint:"]
    lines += checkpoint_lines(result.checkpoint_json)
    if url:
        lines.append(f"Web UI: {url}")
    return lines, same


def checkpoint_lines(data: object) -> list[str]:
    """The adapter's checkpoint in a few lines (its notes as they are)."""
    if not isinstance(data, dict):
        return ["  (none)"]
    head = str(data.get("head") or "")[:10]
    lines = [
        f"  step {data.get('step')}, next: {data.get('next', '-')}, session "
        f"{data.get('session_id') or '-'}, HEAD {head or '-'}"
    ]
    notes = data.get("notes")
    if isinstance(notes, list):
        lines += [f"    - {terminal_line(str(note))}" for note in notes]
    return lines


def main(argv: list[str] | None = None) -> int:
    """`python -m overnight.demo.agent_demo --agent KIND`: as `overnight demo --agent KIND`."""
    parser = argparse.ArgumentParser(
        prog="overnight demo --agent",
        description="A real coding agent's run, killed once mid-run and resumed in its session.",
    )
    parser.add_argument("--agent", required=True, choices=KINDS, help="the coding agent's CLI")
    parser.add_argument("--keep-server", action="store_true", help="leave the dev server running")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(run_agent_demo(args.agent, keep_server=args.keep_server))
    except KeyboardInterrupt:
        return 1
    except api.OvernightError as error:
        print(f"overnight demo: {error}", file=sys.stderr)
        return 2 if getattr(error, "bad_input", False) else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as the console script does: no teardown under the client's threads
