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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.procs import dev_server
from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.cli.demo import make_origin
from overnight.home import HOME_ENV
from overnight.models import RunSpec
from overnight.worker.runner import serve

WARM_AGENT = Path(__file__).resolve().parent.parent / "tests" / "agents" / "warm"
DEFAULT_EVERY = 600


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


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot_recovery")
    parser.add_argument("--warm-seconds", type=float, default=30)
    parser.add_argument("--provider", choices=["local"], default="local")
    args = parser.parse_args(argv)
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
            worker = asyncio.create_task(serve(client, task_queue=queue, ready=ready, stop=stop))
            await asyncio.wait_for(ready.wait(), timeout=60)
            rows = []
            for recovery in ("checkpoint", "snapshot"):
                run_id = f"snapbench-{recovery}-{uuid.uuid4().hex[:6]}"
                spec = spec_for(run_id, root, args.provider, args.warm_seconds, recovery)
                rows.append(await one_run(client, queue, spec))
            stop.set()
            await asyncio.wait_for(worker, timeout=60)
    checkpoint, snapshot = rows
    ratio = checkpoint["recovery_seconds"] / max(0.001, snapshot["recovery_seconds"])
    per_hour = snapshot["pause_per_capture_seconds"] * 3600 / DEFAULT_EVERY
    print(json.dumps({"runs": rows, "ratio": round(ratio, 1), "pause_per_hour": per_hour}))
    print(
        f"| snapshot recovery ({args.provider}, warm state {args.warm_seconds:g} s) | "
        f"checkpoint {checkpoint['recovery_seconds']:.2f} s | "
        f"snapshot {snapshot['recovery_seconds']:.2f} s | {ratio:.1f}x faster | "
        f"pause {snapshot['pause_per_capture_seconds']:.3f} s per capture, "
        f"<= {per_hour:.2f} s per hour at one capture per {DEFAULT_EVERY} s |"
    )
    return 0 if ratio >= 5 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
