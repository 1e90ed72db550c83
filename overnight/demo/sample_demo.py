"""`overnight demo`: one run of the sample agent (overnight/demo/sample_agent/main.py) that
crashes after opening its pull request, is restarted from its last checkpoint, and finishes
with exactly two outside actions.

Everything is local: the dev server from temporal-dev.yaml (started or reused), a worker in
this process on a task queue of its own, a bare git repository as the origin (bound writable
into the sandboxes, so the agent can push), the outside world as a loopback service keeping
the ledger of outside actions (overnight/demo/outside_world.py), and local sandboxes under the
state dir, isolated with bubblewrap unless `--isolation none`. The origin and the ledger live
beside the state dir, in `<OVERNIGHT_HOME>-demo/<run id>` (never inside it: no sandbox may see
the state dir), and the demo's worker grants that folder's writable binds, and `isolation:
"none"` when asked for it, besides what its environment grants (overnight/core/grants.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.client import Client

from overnight.cli import client as api
from overnight.cli import render
from overnight.core.codec import data_converter
from overnight.core.errors import SpecError
from overnight.core.grants import Grants
from overnight.core.home import overnight_home
from overnight.core.isolation import HostBind, Isolation
from overnight.core.models import Budget, RunResult, RunSpec, RunStatus
from overnight.demo.outside_world import host_ports_for, ledger_url
from overnight.worker.devconfig import DevConfig

if TYPE_CHECKING:
    from overnight.worker.devserver import DevServer

# Shipped in the package (pyproject.toml's package data), so an installed wheel plays it too.
AGENT_DIR = Path(__file__).resolve().parent / "sample_agent"
AGENT_COMMAND = "python3 /workspace/agent/main.py --resume /workspace/checkpoint.json"
DIE_AFTER_STEP = 4  # open the pull request
RESULT_TIMEOUT_SECONDS = 120
WORKER_READY_TIMEOUT_SECONDS = 30

TINY_APP = {
    "README.md": "# tasks\n\nA tiny to-do app the sample agent adds a migration to.\n",
    "tasks.py": (
        "def add_task(tasks, title):\n"
        "    return [*tasks, {'title': title, 'done': False}]\n\n\n"
        "def finish(tasks, title):\n"
        "    return [{**t, 'done': t['done'] or t['title'] == title} for t in tasks]\n"
    ),
    "tests/test_tasks.py": (
        "import unittest\n\nfrom tasks import add_task, finish\n\n\n"
        "class TasksTest(unittest.TestCase):\n"
        "    def test_finish_marks_the_task_done(self):\n"
        "        tasks = finish(add_task([], 'write docs'), 'write docs')\n"
        "        self.assertTrue(tasks[0]['done'])\n"
    ),
}


@dataclass(frozen=True)
class DemoFiles:
    origin: Path
    ledger: Path


def kept_server_line(server: DevServer) -> str:
    """What `--keep-server` leaves, and how to stop it when this demo started it (its process
    outlives the demo, and nothing else names it)."""
    line = f"dev server left running at {server.address}"
    if server.process is None:  # one found running: it was someone's before the demo
        return line
    pid = server.process.pid
    return f"{line} (process {pid}: `kill {pid}` stops it)"


def new_run_id() -> str:
    return f"demo-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def demo_root() -> Path:
    """Where the demo's origins and ledgers go: beside the state dir, never inside it."""
    home = overnight_home()
    return home.with_name(f"{home.name}-demo")


def demo_grants(isolation: Isolation) -> Grants:
    """What the demo's worker lets its spec ask for, besides its environment's grants: the
    origin's writable bind, and no isolation when the person asked for none."""
    from activities.admission.grants import worker_grants

    root = demo_root()
    roots = tuple(dict.fromkeys([str(root), str(root.resolve())]))
    return worker_grants().merged(
        Grants(writable_bind_roots=roots, allow_unisolated=isolation == "none")
    )


def make_origin(root: Path) -> DemoFiles:
    """A bare repository holding the tiny app, and where the ledger (the outside world) goes."""
    work, origin = root / "app-seed", root / "origin.git"
    for relative, text in TINY_APP.items():
        path = work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    ident = ["-c", "user.name=overnight demo", "-c", "user.email=demo@overnight.invalid"]
    # Shared with every user: a worker running as root runs each run's agents as a user of
    # their own, who pushes here (and git keeps what it adds as open as this).
    _git(root, "init", "-q", "--bare", "--shared=0777", "-b", "main", str(origin))
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", "-A")
    _git(work, *ident, "commit", "-q", "-m", "tiny tasks app")
    _git(work, "push", "-q", str(origin), "main")
    _open_to_everyone(origin)
    return DemoFiles(origin=origin, ledger=root / "outside-world" / "ledger.jsonl")


def _open_to_everyone(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o777 if path.is_dir() else 0o666)


def demo_spec(
    run_id: str,
    files: DemoFiles,
    *,
    ledger: str,
    agent_dir: Path = AGENT_DIR,
    command: str = AGENT_COMMAND,
    isolation: Isolation = "bubblewrap",
) -> RunSpec:
    """The demo's RunSpec: short polls and stalls, so the whole story takes seconds. `ledger`
    is the outside world's URL for this run's ledger. Another agent (`agent_dir`, `command`)
    plays the same scenario if it takes the sample agent's switches (examples/shell_agent)."""
    return RunSpec(
        run_id=run_id,
        repo=str(files.origin),
        agent_dir=str(agent_dir),
        command=command,
        env={
            "OVERNIGHT_LEDGER_URL": ledger,
            "AGENT_DIE_AFTER": str(DIE_AFTER_STEP),
            "AGENT_STEP_DELAY": "0.5",
        },
        poll_seconds=1,
        stall_seconds=10,
        sandbox_timeout_seconds=120,
        budget=Budget(max_restarts=3, max_hours=1),
        isolation=isolation,
        # The agent pushes each step, so a new sandbox clones the work the checkpoint lists.
        binds=[HostBind(path=str(files.origin), writable=True)],
        # The sandbox's network reaches the worker's loopback only on the ledger's port.
        host_ports=host_ports_for(ledger),
    )


def ledger_entries(ledger: Path) -> list[dict[str, object]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines() if line]


async def run_demo(
    *,
    keep_server: bool = False,
    config: DevConfig | None = None,
    out: Callable[[str], None] = print,
    isolation: Isolation = "bubblewrap",
    port: int | None = None,
    config_path: Path | None = None,
) -> int:
    """The whole demo; 0 when the run finished with exactly two outside actions. Its dev
    server: `config`, else temporal-dev.yaml (`config_path`, else the current folder's, else
    the repo's) on `port` if given (which must be free), else on the file's port or, when
    another program holds it, the next free one."""
    from activities.providers.local.isolation import bwrap_problem
    from overnight.worker.runner import serve

    if not (AGENT_DIR / "main.py").is_file():
        raise api.OvernightError(f"the sample agent is missing: {AGENT_DIR / 'main.py'}")
    problem = bwrap_problem() if isolation == "bubblewrap" else None
    if problem is not None:
        raise SpecError(
            f"{problem}: install bubblewrap (e.g. sudo apt-get install bubblewrap), or run "
            "the demo without isolation: overnight demo --isolation none"
        )
    logging.basicConfig(level=logging.WARNING)
    converter = data_converter()  # a bad OVERNIGHT_CODEC_KEYS is refused before any start
    server = await demo_server(config, config_path, port, out)
    try:
        # Plain loopback connection: env config (TLS, API keys) is for real clusters.
        client = await Client.connect(
            server.address, namespace=server.namespace, data_converter=converter
        )
        ready, stop = asyncio.Event(), asyncio.Event()
        # A queue of its own: a worker of the person's (`overnight dev`) on `overnight` would
        # neither grant the demo's bind nor go away with the demo.
        queue = f"demo-{secrets.token_hex(4)}"
        grants = demo_grants(isolation)
        worker = asyncio.create_task(
            serve(client, task_queue=queue, ready=ready, stop=stop, grants=grants)
        )
        try:
            await _wait_ready(worker, ready)
            ui = server.ui_url if server.config.ui else None
            # The link at the end only while the server it points to is still up.
            lasting = keep_server or not server.started_here
            return await _demo_run(client, ui, out, isolation, queue, lasting)
        finally:
            stop.set()
            await asyncio.wait_for(worker, timeout=30)
    finally:
        if keep_server:
            out(kept_server_line(server))
        else:
            server.stop()


async def demo_server(
    config: DevConfig | None,
    config_path: Path | None,
    port: int | None,
    out: Callable[[str], None],
) -> DevServer:
    """The demos' dev server: `config`, else temporal-dev.yaml (`config_path`, else the current
    folder's, else the repo's) on `port` if given (which must be free), else on the file's port
    or, when another program holds it, the next free one; started, or reused when it runs."""
    from overnight.worker.dev_ports import moved_lines, with_port
    from overnight.worker.devconfig import find_dev_settings
    from overnight.worker.devserver import start_or_reuse

    if config is None:
        settings = find_dev_settings(config_path)
        out(settings.describe())
        config = with_port(settings.config, port)
    server = await start_or_reuse(config, move_when_held=port is None)
    how = "started" if server.started_here else "reused"
    out(f"Temporal dev server at {server.address} ({how})")
    for line in moved_lines(server.moved_from, server.config):
        out(line)
    return server


async def _wait_ready(worker: asyncio.Task[None], ready: asyncio.Event) -> None:
    waiter = asyncio.create_task(ready.wait())
    done, _ = await asyncio.wait(
        {worker, waiter}, timeout=WORKER_READY_TIMEOUT_SECONDS, return_when=asyncio.FIRST_COMPLETED
    )
    waiter.cancel()
    if worker in done:
        worker.result()  # raises what stopped the worker
    if not ready.is_set():
        raise api.OvernightError("the worker did not start polling in time")


async def _demo_run(
    client: Client,
    ui_base: str | None,
    out: Callable[[str], None],
    isolation: Isolation,
    task_queue: str,
    server_stays: bool = True,
) -> int:
    run_id = new_run_id()
    root = demo_root() / run_id
    files = await asyncio.to_thread(make_origin, root)
    spec = demo_spec(run_id, files, ledger=ledger_url(files.ledger), isolation=isolation)
    url = api.web_ui_url(ui_base, client.namespace, run_id) if ui_base else None
    started = time.monotonic()
    await api.start_run(client, spec, task_queue=task_queue)
    out(f"started {run_id}: the agent will crash after opening its pull request")
    if url:
        out(f"Web UI: {url}")
    result = await _follow(client, run_id, out)
    status = await api.get_status(client, run_id)
    actions = ledger_entries(files.ledger)
    out(_report(result, status, actions, url if server_stays else None, time.monotonic() - started))
    if url and not server_stays:
        out("the dev server is stopped now; `--keep-server` leaves it and the Web UI running")
    return 0 if result.outcome == "finished" and len(actions) == 2 else 1


async def _follow(
    client: Client,
    run_id: str,
    out: Callable[[str], None],
    *,
    timeout: float = RESULT_TIMEOUT_SECONDS,
) -> RunResult:
    """Wait for the result, printing a line whenever the state, attempt or step changes."""
    waiting = asyncio.create_task(api.wait_result(client, run_id))
    seen: tuple[str, int, str | None] | None = None
    deadline = time.monotonic() + timeout
    while not waiting.done():
        if time.monotonic() > deadline:
            waiting.cancel()
            await api.cancel_run(client, run_id, "the demo took too long")
            raise api.OvernightError(f"{run_id} did not finish in {timeout:.0f}s")
        try:
            status = await api.get_status(client, run_id)
        except Exception:  # a query during a worker hiccup: just look again
            status = None
        if status is not None:
            step = status.checkpoint_summary.next if status.checkpoint_summary else None
            now = (status.state, status.attempt, step)
            if now != seen:
                seen = now
                attempt = f"attempt {status.attempt}" if status.attempt else ""
                out(f"  {status.state:<11} {attempt:<10} next: {step or '-'}")
        await asyncio.wait({waiting}, timeout=0.5)
    return waiting.result()


def _report(
    result: RunResult,
    status: RunStatus,
    actions: list[dict[str, object]],
    url: str | None,
    seconds: float,
) -> str:
    # The elapsed time belongs to the result's first line (what follows it: outputs, safety net).
    first, *rest = render.result_text(result).split("\n")
    lines = [
        "",
        f"{first} in {seconds:.0f}s",
        *rest,
        "timeline:",
        render.timeline_text(status),
        "final checkpoint:",
        render.checkpoint_text(result.checkpoint),
        f"{len(actions)} outside action{'s' if len(actions) != 1 else ''} in total:",
        *(f"  {entry.get('key')}: {entry.get('action')}" for entry in actions),
    ]
    if status.isolation:
        lines.append(f"sandboxes: {status.isolation}")
    if url:
        lines.append(f"Web UI: {url}")
    return "\n".join(lines)


def _git(cwd: Path, *args: str) -> None:
    cwd.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)
