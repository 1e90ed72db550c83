"""What the dev server's SQLite journal costs: `python -m bench.dev_server_journal`.

The same runs (workflows of activity steps, each followed by a short timer, all started at once)
against two dev servers started alike from temporal-dev.yaml on free ports, each with a fresh
database and measured alone: the baseline with SQLite's default journal (`delete`), overnight
with its own (`wal`, `sqlite_journal_mode` in overnight/worker/devconfig.py). Measured: the
server process's CPU seconds while the runs ran, from /proc (Linux); their wall time for
context. The workflow runs unsandboxed: the server's work is what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench.procs import cpu_seconds, free_ports
from bench.report import Row, render_text
from overnight.worker.devconfig import default_dev_config
from overnight.worker.devserver import start_or_reuse

# overnight's CPU for the same runs may be at most this share of the baseline's.
RATIO_AT_MOST = 0.8


@dataclass(frozen=True)
class Load:
    runs: int = 20
    steps: int = 40


@dataclass(frozen=True)
class Measured:
    cpu_seconds: float
    wall_seconds: float


@activity.defn
async def journal_step(n: int) -> int:
    return n + 1


@workflow.defn
class JournalLoop:
    @workflow.run
    async def run(self, steps: int) -> int:
        n = 0
        for _ in range(steps):
            n = await workflow.execute_activity(
                journal_step, n, start_to_close_timeout=timedelta(seconds=30)
            )
            await workflow.sleep(0.01)
        return n


async def measure(journal: str, load: Load, state_dir: Path) -> Measured:
    port, ui_port = free_ports(2)
    config = default_dev_config().with_overrides(
        port=port,
        ui_port=ui_port,
        db_file=state_dir / "dev.sqlite",
        log_file=state_dir / "dev-server.log",
    )
    config = config.model_copy(update={"sqlite_journal_mode": journal, "ui": False})
    server = await start_or_reuse(config, stop_with_parent=True)
    try:
        assert server.process is not None
        client = await Client.connect(server.address, namespace=server.namespace)
        queue = f"journal-{uuid.uuid4().hex[:8]}"
        worker = Worker(
            client,
            task_queue=queue,
            workflows=[JournalLoop],
            activities=[journal_step],
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        async with worker:
            before, started = cpu_seconds(server.process.pid), time.monotonic()
            await asyncio.gather(
                *(
                    client.execute_workflow(
                        JournalLoop.run, load.steps, id=f"{queue}-{i}", task_queue=queue
                    )
                    for i in range(load.runs)
                )
            )
            wall = time.monotonic() - started
            used = cpu_seconds(server.process.pid) - before
        return Measured(used, wall)
    finally:
        await asyncio.to_thread(server.stop)


async def rows(load: Load) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="journal-bench-") as folder:
        baseline = await measure("delete", load, Path(folder) / "delete")
        overnight = await measure("wal", load, Path(folder) / "wal")
    what = f"{load.runs} runs of {load.steps} steps at once"
    return [
        Row(
            f"dev server CPU for {what}: wal vs delete journal",
            "s",
            baseline.cpu_seconds,
            overnight.cpu_seconds,
            target=f"ratio <= {RATIO_AT_MOST}",
            ratio_at_most=RATIO_AT_MOST,
            group="dev_server_journal",
        ),
        Row(
            f"wall time of {what}",
            "s",
            baseline.wall_seconds,
            overnight.wall_seconds,
            note="context: on a loaded machine it varies",
            group="dev_server_journal",
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dev_server_journal")
    parser.add_argument("--quick", action="store_true", help="2 runs of 3 steps")
    args = parser.parse_args(argv)
    load = Load(runs=2, steps=3) if args.quick else Load()
    print(render_text(asyncio.run(rows(load))))


if __name__ == "__main__":
    main()
