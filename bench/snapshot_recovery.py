"""Snapshot recovery vs checkpoint recovery for an agent whose state is not in files.

`python -m bench.snapshot_recovery [--warm-seconds 30] [--provider local]`: the warm agent
(tests/agents/warm) builds warm state for `--warm-seconds` (a SQLite database it fills and a
helper process it starts), asks for a snapshot (`snapshot_here()`), and crashes after step 4.
The same run is made twice on the real stack (a dev server of its own, a worker in this
process, real sandboxes): with `recovery: "checkpoint"` and with `recovery: "snapshot"`.

recovery = agent working again (its `ready_at` for attempt 2, written once its warm state is
there again) - noticed (the restart record's `at`); both on this machine's clock. The pause
the snapshots cost is the run's `snapshot_pause_seconds` per capture, and per hour at the
spec's least interval between captures (`snapshot_every_seconds`, default 600 s).

Its rows (group `snapshot`) go into bench/results/latest.json beside the suite's, as a
`python -m bench --only X` run's do: the other rows are kept, and docs/performance.md's
tables are rewritten from the file (`--results DIR` writes elsewhere and leaves the page).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.procs import dev_server
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.grants import Grants
from overnight.core.home import HOME_ENV
from overnight.core.models import RunSpec
from overnight.demo.sample_demo import make_origin
from overnight.worker.runner import serve

WARM_AGENT = Path(__file__).resolve().parent.parent / "tests" / "agents" / "warm"
DEFAULT_EVERY = 600
# Snapshot recovery must beat recovery from the checkpoint by this factor at least.
TARGET_SPEEDUP = 5


def spec_for(run_id: str, root: Path, provider: str, warm: float, recovery: str) -> RunSpec:
    files = make_origin(root / run_id)
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            **origin_fields(files.origin, provider),
            "provider": provider,
            "agent_dir": str(WARM_AGENT),
            "command": "python3 /workspace/agent/main.py",
            "env": {"AGENT_WARM_SECONDS": str(warm), "AGENT_STEPS": "6", "AGENT_CRASH_AT": "4"},
            "poll_seconds": 1,
            "stall_seconds": max(120, warm * 4),
            "sandbox_timeout_seconds": 600,
            "recovery": recovery,
            "snapshot_mode": "disk" if recovery == "snapshot" else None,
        }
    )


async def one_run(client: Client, queue: str, spec: RunSpec) -> dict[str, Any]:
    await api.start_run(client, spec, task_queue=queue)
    result = await asyncio.wait_for(api.wait_result(client, spec.run_id), timeout=900)
    status = await api.get_status(client, spec.run_id)
    final = json.loads(result.checkpoint or "{}")
    noticed = status.restarts[0].at.timestamp()
    taken = max(1, status.snapshots_taken)
    return {
        "recovery": spec.recovery,
        "recovery_seconds": round(final["ready_at"]["2"] - noticed, 2),
        "builds": final["builds"],
        "restarts": result.restarts,
        "snapshots": status.snapshots_taken,
        "pause_per_capture_seconds": round(status.snapshot_pause_seconds / taken, 3),
    }


def result_rows(runs: list[dict[str, Any]], provider: str, warm: float) -> list[Row]:
    """The table's rows from the two runs: the checkpoint run stands in the baseline column,
    since recovery from the checkpoint is what a snapshot has to beat."""
    checkpoint, snapshot = runs
    per_capture = snapshot["pause_per_capture_seconds"]
    rows = [
        Row(
            f"snapshot recovery: noticed -> agent working again ({provider}, warm state "
            f"{warm:g} s; baseline: recovery from the checkpoint)",
            "s",
            checkpoint["recovery_seconds"],
            snapshot["recovery_seconds"],
            target=f"ratio <= {1 / TARGET_SPEEDUP:g} ({TARGET_SPEEDUP}x faster)",
            ratio_at_most=1 / TARGET_SPEEDUP,
        ),
        Row(f"snapshot: sandbox paused per capture (disk, {provider})", "s", None, per_capture),
        Row(
            f"snapshot: sandbox paused per hour at one capture per {DEFAULT_EVERY} s",
            "s",
            None,
            round(per_capture * 3600 / DEFAULT_EVERY, 3),
        ),
    ]
    for row in rows:
        row.group = "snapshot"
    return rows


async def measure(provider: str, warm: float) -> list[dict[str, Any]]:
    """The two runs, checkpoint then snapshot, on a dev server and a worker of their own."""
    with tempfile.TemporaryDirectory(prefix="snapshot-bench-") as scratch:
        root = Path(scratch)
        (root / "dev").mkdir()
        # Sandboxes and snapshots under the scratch folder, not the user's ~/.overnight.
        os.environ[HOME_ENV] = str(root / "home")
        async with dev_server(root / "dev") as server:
            client = await Client.connect(
                server.address, namespace=server.namespace, data_converter=pydantic_data_converter
            )
            queue = f"snapbench-{uuid.uuid4().hex[:8]}"
            ready, stop = asyncio.Event(), asyncio.Event()
            # The origins under `root` are bound writable: the worker grants it.
            grants = Grants(writable_bind_roots=(str(root.resolve()),))
            worker = asyncio.create_task(
                serve(client, task_queue=queue, ready=ready, stop=stop, grants=grants)
            )
            await asyncio.wait_for(ready.wait(), timeout=60)
            runs = []
            for recovery in ("checkpoint", "snapshot"):
                run_id = f"snapbench-{recovery}-{uuid.uuid4().hex[:6]}"
                spec = spec_for(run_id, root, provider, warm, recovery)
                runs.append(await one_run(client, queue, spec))
            stop.set()
            await asyncio.wait_for(worker, timeout=60)
    return runs


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot_recovery")
    parser.add_argument("--warm-seconds", type=float, default=30)
    parser.add_argument("--provider", choices=["local"], default="local")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    began, started_at = time.monotonic(), datetime.now(UTC)
    runs = await measure(args.provider, args.warm_seconds)
    rows = result_rows(runs, args.provider, args.warm_seconds)
    checkpoint, snapshot = runs
    ratio = checkpoint["recovery_seconds"] / max(0.001, snapshot["recovery_seconds"])
    details = {
        "snapshot_recovery": {
            "runs": runs,
            "speedup": round(ratio, 1),
            "provider": args.provider,
            "warm_seconds": args.warm_seconds,
        }
    }
    meta = {
        "command": "python -m bench.snapshot_recovery"
        + (f" --warm-seconds {args.warm_seconds:g}" if args.warm_seconds != 30 else ""),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": ["snapshot"],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(json.dumps(details["snapshot_recovery"]))
    print(render_text(rows))
    print(f"{ratio:.1f}x faster; wrote {json_path}")
    return 0 if rows[0].passed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
