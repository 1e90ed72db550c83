"""`bash scripts/demo --agent claude-code`: the real Claude Code CLI as a run's agent, killed
once in the middle of a tool call and resumed in the same session, on the embedded default.

What runs is what a person's run would run, with one stand-in: the model. The pinned CLI
(`bash scripts/install-agent-clis`, which scripts/demo runs first), overnight's adapter in an
isolated local sandbox (bubblewrap), the local dev server and a worker in this process, the
run's origin a bare repository beside the state dir (as `overnight demo` makes it). The model
API is the scripted fake of `fakes/model_api`, started by the demo as its own process on a
free loopback port (`python -m fakes.model_api --script FILE --port 0 --log FILE`): its script
is a small task of six answers (write greet.py, run it, fix it, a slow run, the run again, the
final word), and its log shows which session each request came from.

The kill: while the CLI runs the script's slow tool call (a `sleep`), the demo finds the CLI's
native binary among the machine's processes (its argv[0] under the sandbox's
`/overnight/agents`, its environment naming the run) and SIGKILLs it. The adapter sees the CLI
die, ends the tool process it left behind and starts the CLI again with `--resume` on the
same session, in the same sandbox: one attempt, no restart. The demo prints the session id
the model API saw before the kill and after it, the attempts and restarts, the spend and the
commits on the run's branch. The origin, the script and the fake's log stay in
`<OVERNIGHT_HOME>-demo/<run id>`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client

from overnight.agent_text import terminal_line
from overnight.cli import client as api
from overnight.cli import render
from overnight.cli.demo import _follow, _wait_ready, demo_grants, demo_root, make_origin
from overnight.codec import data_converter
from overnight.coding_agents import (
    INSTALL_SCRIPT,
    SANDBOX_AGENTS_ROOT,
    agent_cli,
    install_problem,
)
from overnight.errors import SpecError
from overnight.grants import Grants
from overnight.models import RunResult, RunSpec, RunStatus
from overnight.worker.devconfig import DevConfig

REPO = Path(__file__).resolve().parents[2]
FAKE_PACKAGE = REPO / "fakes" / "model_api"
KINDS = ("claude-code",)  # what this demo plays (Codex: not yet)
CREDENTIAL = "ANTHROPIC_API_KEY"
# The fake accepts any key; the worker copies this one from its own environment (this
# process's, for the demo only) into the sandbox, as it would a real one.
FAKE_KEY = "sk-demo-fake-model-api"
SLOW_SECONDS = 30  # the slow tool call's length: the CLI is killed while it runs
# The slow tool call's process, a stand-in for a slow test suite. (Not `sleep 30 && ...`:
# Claude Code refuses a command that begins with a long sleep.)
SLOW_CHECK = f"python3 -c 'import time; time.sleep({SLOW_SECONDS})'"
RESULT_TIMEOUT_SECONDS = 300
KILL_TIMEOUT_SECONDS = 180
FAKE_READY_SECONDS = 30
PROMPT = (
    "Write greet.py, a script that prints 'Hello, overnight'. Run it, fix what is wrong, "
    "then save its output to greeting.txt."
)
APP = "/workspace/app"  # the spec's cwd (the clone)


def model_script() -> dict[str, Any]:
    """The fake model's answers, in order (fakes/model_api/script_file.py)."""
    slow = f"{SLOW_CHECK} && python3 greet.py > greeting.txt"
    return {
        "turns": [
            {
                "text": "I'll write the script first.",
                "tools": [
                    {"write": {"path": f"{APP}/greet.py", "content": "print('Helo, overnight')\n"}}
                ],
                "label": "write greet.py",
            },
            {"tools": [{"shell": "python3 greet.py"}], "label": "run it"},
            {
                "text": "It says Helo: a typo. Fixing it.",
                "tools": [{"shell": "sed -i 's/Helo/Hello/' greet.py"}],
                "label": "fix it",
            },
            {"tools": [{"shell": slow}], "label": "slow run (the CLI is killed here)"},
            {
                "text": "The last run was cut off; running it again.",
                "tools": [{"shell": "python3 greet.py > greeting.txt && cat greeting.txt"}],
                "label": "run it again",
            },
            {
                "text": "greet.py prints 'Hello, overnight'; its output is in greeting.txt.",
                "label": "final answer",
            },
        ]
    }


# --- the fake model API, as its own process ---


@dataclass
class FakeModelApiProcess:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        """What the fake has answered so far, one summary a request, in order."""
        if not self.log.exists():
            return []
        found = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line being written
            summary = {key: entry.get(key) for key in ("number", "session_id", "label")}
            summary["call_ids"] = entry.get("call_ids") or []
            summary["results"] = _tool_results(entry.get("body"))
            found.append(summary)
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def _tool_results(body: object) -> dict[str, str]:
    """A Messages request's tool results: call id -> the result's text."""
    results: dict[str, str] = {}
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                value = block.get("content")
                if isinstance(value, list):
                    value = " ".join(str(part.get("text", "")) for part in value if part)
                results[str(block.get("tool_use_id"))] = str(value)
    return results


def start_fake_model_api(folder: Path) -> FakeModelApiProcess:
    """`python -m fakes.model_api` on a free port of 127.0.0.1, serving `model_script()`."""
    if not (FAKE_PACKAGE / "__main__.py").is_file():
        raise api.OvernightError(
            f"the fake model API is missing ({FAKE_PACKAGE}): the agent demo runs from the "
            "repository (bash scripts/demo --agent claude-code)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    script, log = folder / "model-api-script.json", folder / "model-api.log"
    script.write_text(json.dumps(model_script(), indent=2) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "fakes.model_api", "--script", str(script)]
    command += ["--port", "0", "--log", str(log)]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    # Its first line: "fake model API on http://127.0.0.1:PORT: ..." (or why it could not).
    first = _first_line(process, FAKE_READY_SECONDS)
    if not first.startswith("fake model API on http://"):
        process.kill()
        process.wait()
        process.stdout.close()
        raise api.OvernightError(f"the fake model API did not start: {first or 'no output'}")
    url = first.removeprefix("fake model API on ").split(": ", 1)[0]
    return FakeModelApiProcess(process=process, url=url, log=log)


def _first_line(process: subprocess.Popen[str], seconds: float) -> str:
    stdout = process.stdout
    assert stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return lines[0].strip() if lines else ""


# --- the CLI's processes in the run's sandbox ---


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as source:
            return [part.decode(errors="replace") for part in source.read().split(b"\0") if part]
    except OSError:
        return []


def _environ_has(pid: int, entry: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as source:
            return entry.encode() in source.read().split(b"\0")
    except OSError:
        return False


def _environ_value(pid: int, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as source:
            entries = source.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{name}=".encode()
    found = [entry[len(prefix) :] for entry in entries if entry.startswith(prefix)]
    return found[0].decode(errors="replace") if found else None


def transcript_mentions(pid: int, text: str) -> bool:
    """Whether the CLI's session transcript (under its own HOME, seen through its root) holds
    `text` yet: Claude Code writes a tool call into it a little after the tool starts."""
    home = _environ_value(pid, "HOME")
    if home is None:
        return False
    projects = Path(f"/proc/{pid}/root") / home.lstrip("/") / ".claude" / "projects"
    try:
        paths = list(projects.rglob("*.jsonl"))
    except OSError:
        return False
    return any(text in _tail_of(path) for path in paths)


# How much of a transcript's end is read: the slow call is among its last records.
TRANSCRIPT_TAIL_BYTES = 1 << 20


def _tail_of(path: Path) -> str:
    """The end of a regular file (a FIFO or a folder named like one reads as empty: the read
    never blocks, and never takes more than TRANSCRIPT_TAIL_BYTES)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return ""
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        return ""
    with os.fdopen(fd, "rb") as source:
        source.seek(max(0, found.st_size - TRANSCRIPT_TAIL_BYTES))
        return source.read(TRANSCRIPT_TAIL_BYTES).decode("utf-8", errors="replace")


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as source:
            return int(source.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def cli_pids(run_id: str) -> list[int]:
    """The CLI's native binary of run `run_id`, as this machine numbers it: a process whose
    argv[0] is a Claude Code binary under the sandbox's agents folder and whose environment
    names the run (the adapter passes its own on to the CLI). Topmost first."""
    found = [
        pid
        for pid in _pids()
        if (argv := _argv(pid))
        and argv[0].startswith(SANDBOX_AGENTS_ROOT + "/")
        and argv[0].endswith("/claude")
        and _environ_has(pid, f"OVERNIGHT_RUN_ID={run_id}")
    ]
    return [pid for pid in found if _parent(pid) not in found]


def descendants(pid: int) -> list[tuple[int, list[str]]]:
    children: dict[int, list[int]] = {}
    for other in _pids():
        children.setdefault(_parent(other), []).append(other)
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop()
        found.append((child, _argv(child)))
        queue += children.get(child, [])
    return found


@dataclass
class Kill:
    pid: int
    during: str  # the tool process it was running
    session_before: list[str] = field(default_factory=list)
    requests_before: int = 0
    at: float = 0.0


async def kill_during_the_slow_call(
    run_id: str, fake: FakeModelApiProcess, out: Callable[[str], None]
) -> Kill:
    """Wait until the CLI runs the slow tool call (its process is under the CLI's), then
    SIGKILL the CLI, and only it: what it leaves is the adapter's to end."""
    deadline = time.monotonic() + KILL_TIMEOUT_SECONDS
    marker = ["python3", "-c", f"import time; time.sleep({SLOW_SECONDS})"]
    while time.monotonic() < deadline:
        for pid in await asyncio.to_thread(cli_pids, run_id):
            tools = await asyncio.to_thread(descendants, pid)
            if any(argv == marker for _, argv in tools):
                seen = fake.requests()
                # Killed before its transcript records the call, the resumed session would
                # have lost the call itself, not been cut off in it: wait for the record.
                calls = seen[-1]["call_ids"] if seen else []
                if calls and not await asyncio.to_thread(transcript_mentions, pid, calls[0]):
                    await asyncio.sleep(0.05)
                    continue
                os.kill(pid, signal.SIGKILL)
                kill = Kill(
                    pid=pid,
                    during=SLOW_CHECK,
                    session_before=_sessions(seen),
                    requests_before=len(seen),
                    at=time.monotonic(),
                )
                out(
                    f"  >>> killed the CLI (pid {pid}, SIGKILL) during its tool call "
                    f"({kill.during}), after {len(seen)} model requests"
                )
                return kill
        await asyncio.sleep(0.1)
    raise api.OvernightError(
        f"the CLI of {run_id} never reached its slow tool call in {KILL_TIMEOUT_SECONDS}s"
    )


def _sessions(requests: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r.get("session_id") or "") for r in requests))


# --- the demo ---


def agent_spec(run_id: str, origin: Path, base_url: str, port: int) -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            "repo": str(origin),
            # The adapter pushes each step here (and a new sandbox would clone it).
            "binds": [{"path": str(origin), "writable": True}],
            "agent": {"kind": "claude-code", "prompt": PROMPT, "base_url": base_url},
            "secret_env": [CREDENTIAL],
            # The sandbox's network reaches the worker's loopback only on the fake's port.
            "host_ports": [port],
            "poll_seconds": 1,
            "stall_seconds": 120,
            "sandbox_timeout_seconds": 600,
            "budget": {"max_restarts": 3, "max_hours": 1},
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


async def run_agent_demo(
    kind: str = "claude-code",
    *,
    keep_server: bool = False,
    config: DevConfig | None = None,
    out: Callable[[str], None] = print,
) -> int:
    """The whole demo; 0 when the run finished in one attempt with no restart, the CLI killed
    once and the same session resumed."""
    from overnight.worker.devconfig import default_dev_config
    from overnight.worker.devserver import start_or_reuse
    from overnight.worker.runner import serve

    if kind not in KINDS:
        raise SpecError(f"the agent demo plays {', '.join(KINDS)} only, not {kind!r}")
    problem = await asyncio.to_thread(readiness_problem, kind)
    if problem is not None:
        raise SpecError(problem)
    logging.basicConfig(level=logging.WARNING)
    converter = data_converter()
    server = await start_or_reuse(config or default_dev_config())
    how = "started" if server.started_here else "reused"
    out(f"Temporal dev server at {server.address} ({how})")
    earlier_key = os.environ.get(CREDENTIAL)
    os.environ[CREDENTIAL] = FAKE_KEY  # this process's only: the worker below copies it
    try:
        client = await Client.connect(
            server.address, namespace=server.namespace, data_converter=converter
        )
        ready, stop = asyncio.Event(), asyncio.Event()
        queue = f"demo-{secrets.token_hex(4)}"
        grants = demo_grants("bubblewrap").merged(Grants(secret_env=(CREDENTIAL,)))
        worker = asyncio.create_task(
            serve(client, task_queue=queue, ready=ready, stop=stop, grants=grants)
        )
        try:
            await _wait_ready(worker, ready)
            ui = server.ui_url if server.config.ui else None
            return await _agent_run(client, ui, out, queue, kind)
        finally:
            stop.set()
            await asyncio.wait_for(worker, timeout=60)
    finally:
        if earlier_key is None:
            os.environ.pop(CREDENTIAL, None)
        else:
            os.environ[CREDENTIAL] = earlier_key
        if keep_server:
            out(f"dev server left running at {server.address}")
        else:
            server.stop()


async def _agent_run(
    client: Client, ui_base: str | None, out: Callable[[str], None], queue: str, kind: str
) -> int:
    cli = agent_cli(kind)
    run_id = new_run_id(kind)
    root = demo_root() / run_id
    files = await asyncio.to_thread(make_origin, root)
    fake = await asyncio.to_thread(start_fake_model_api, root)
    try:
        port = int(fake.url.rsplit(":", 1)[1])
        spec = agent_spec(run_id, files.origin, fake.url, port)
        url = api.web_ui_url(ui_base, client.namespace, run_id) if ui_base else None
        out(f"fake model API at {fake.url} (a script of 6 answers; log: {fake.log})")
        started = time.monotonic()
        await api.start_run(client, spec, task_queue=queue)
        out(
            f"started {run_id}: {cli.kind} {cli.version} (the real CLI) will be killed during "
            "a tool call"
        )
        if url:
            out(f"Web UI: {url}")
        killing = asyncio.create_task(kill_during_the_slow_call(run_id, fake, out))
        try:
            result = await _follow(client, run_id, out, timeout=RESULT_TIMEOUT_SECONDS)
        finally:
            if not killing.done():
                killing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await killing
        kill = killing.result() if not killing.cancelled() else None
        status = await api.get_status(client, run_id)
        seen = fake.requests()
    finally:
        await asyncio.to_thread(fake.stop)
    commits = await asyncio.to_thread(branch_commits, files.origin, spec.branch)
    lines, same = _report(result, status, kill, seen, commits, spec.branch, url)
    out(f"\n{lines[0]} in {time.monotonic() - started:.0f}s")
    for line in lines[1:]:
        out(line)
    good = result.outcome == "finished" and (result.attempts, result.restarts) == (1, 0)
    return 0 if good and kill is not None and same else 1


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
) -> tuple[list[str], bool]:
    """The report's lines (the first without its time), and whether one session ran it all."""
    first, *rest = render.result_text(result).split("\n")
    lines = [first, *rest]
    same = False
    if kill is None:
        lines.append("the CLI was never killed: it did not reach its slow tool call")
    else:
        after = seen[kill.requests_before :]
        before_ids, after_ids = kill.session_before, _sessions(after)
        lines += [
            f"session before the kill: {', '.join(before_ids) or '-'} "
            f"(model requests 1-{kill.requests_before})",
            f"session after the kill:  {', '.join(after_ids) or '-'} "
            f"(model requests {kill.requests_before + 1}-{len(seen)})",
        ]
        same = len(before_ids) == 1 and before_ids == after_ids
        lines.append(
            "  the same session, resumed in place (--resume)"
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
    lines.append(
        f"spend: ${result.spend_model_usd:.4f} model (Claude Code's own estimate at list "
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
    parser = argparse.ArgumentParser(
        prog="bash scripts/demo",
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
