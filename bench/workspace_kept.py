"""What keeping the workspace at every checkpoint costs, and what it saves:
`python -m bench.workspace_kept [--quick]`.

Per checkpoint (the local engine and the real activities, a 10 MB and a 500 MB repository):
between two checkpoints the agent edits three tracked files and adds a 64 KiB one; the
baseline is what a checkpoint costs without keeping (the checkpoint read), overnight the same
read plus the keep (commit to a private ref, push to a bare origin, and the worker's own
`git ls-remote` of the origin that confirms it, also timed alone). Time is the activities'
wall time; bytes are what the read carries into history, plus what the keep pushes (objects
not yet on the origin). Medians over `--keeps` checkpoints, after a first keep.

Per crash (the real stack: a dev server, a worker in this process, real sandboxes): an agent
that commits and pushes only at its end (bench/agents/pushes_at_end) crashes after step 3 of 4;
the same run without and with `keep_workspace`. Work lost = the step files the crashed attempt
wrote before its last checkpoint that its fresh sandbox did not have; the history events per
checkpoint say what keeping adds to a run's history.

Rows (group `workspace`) go into bench/results/latest.json beside the suite's.

The plan, the origin and the clean-up are bench/workspace_world.py; the crash runs
bench/workspace_crashes.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.models import CreateSandboxInput, ReadCheckpointInput
from activities.models.workspace import KeepWorkspaceInput
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.sandbox.activities import SandboxActivities
from activities.sandbox_base.setup import APP_DIR
from activities.workspace import origin_refs
from activities.workspace.activities import WorkspaceActivities
from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from bench.workspace_crashes import measure_crashes
from bench.workspace_world import MIB, QUICK, Plan, clean_up, make_origin
from overnight.core.grants import Grants
from overnight.core.home import HOME_ENV
from overnight.core.isolation import HostBind
from overnight.core.models import RunSpec

# Per checkpoint, keeping may take at most this long on the 10 MB repository.
KEEP_TARGET_SECONDS = 1.0


async def measure_keeps(root: Path, size_mib: int, keeps: int) -> dict[str, Any]:
    """Seconds and bytes per checkpoint without keeping (the read) and with (read + keep)."""
    origin = make_origin(root / f"repo-{size_mib}", size_mib)
    agent = root / "sleeper"
    agent.mkdir(exist_ok=True)
    (agent / "main.py").write_text("import time\ntime.sleep(3600)\n")
    engine = LocalEngine(root / f"home-{size_mib}")
    provider = LocalProvider(engine)
    spec = RunSpec(
        run_id=f"keepbench-{size_mib}-{uuid.uuid4().hex[:6]}",
        repo=str(origin),
        binds=[HostBind(path=str(origin.parent), writable=True)],
        agent_dir=str(agent),
        command="python3 /workspace/agent/main.py",
        keep_workspace=True,
        max_workspace_mib=1024,
        sandbox_timeout_seconds=3600,
    )
    grants = Grants(writable_bind_roots=(str(root.resolve()),))
    env = ActivityEnvironment()
    found: dict[str, list[float]] = {
        "read_s": [],
        "keep_s": [],
        "check_s": [],
        "read_bytes": [],
        "push_bytes": [],
    }
    async with SandboxActivities(providers={"local": provider}, grants=grants) as acts:
        began = time.perf_counter()
        made = CreateSandboxInput(spec=spec, attempt=1, checkpoint='{"step": 0}')
        started = await env.run(acts.create_sandbox, made)
        create_seconds = time.perf_counter() - began
        sid = started.sandbox_id
        keeper = WorkspaceActivities(lambda _name: _same(provider))
        previous = None
        try:
            for n in range(1, keeps + 2):
                change = (
                    f"for f in d1/f1.bin d2/f2.bin d3/f3.bin; do echo edit {n} >> $f; done; "
                    f"head -c 65536 /dev/urandom > new-{n}.bin; "
                    f"echo '{{\"step\": {n}}}' > /workspace/checkpoint.json"
                )
                ran = await provider.run(sid, change, cwd=APP_DIR, timeout_seconds=60)
                assert ran.exit_code == 0, ran.stderr
                t0 = time.perf_counter()
                read = await env.run(
                    acts.read_checkpoint,
                    ReadCheckpointInput(
                        provider="local",
                        sandbox_id=sid,
                        checkpoint_path=spec.checkpoint_path,
                        max_bytes=spec.max_checkpoint_bytes,
                    ),
                )
                t1 = time.perf_counter()
                kept = await env.run(
                    keeper.keep_workspace,
                    KeepWorkspaceInput(
                        provider="local",
                        sandbox_id=sid,
                        run_id=spec.run_id,
                        repo=spec.repo,
                        number=n,
                        at=datetime.now(UTC),
                        max_bytes=spec.max_workspace_mib * MIB,
                        checkpoint_path=spec.checkpoint_path,
                        max_checkpoint_bytes=spec.max_checkpoint_bytes,
                        previous=previous,
                    ),
                )
                t2 = time.perf_counter()
                assert kept.outcome == "pushed", kept.detail
                previous = kept.commit
                # The worker's look at the origin, which the keep just made too, on its own.
                assert kept.ref is not None and kept.commit is not None
                t3 = time.perf_counter()
                checked = await origin_refs.confirm(spec.repo, kept.ref, kept.commit)
                check_s = time.perf_counter() - t3
                assert checked.confirmed, checked.detail
                if n == 1:
                    continue  # the first keep after the clone: the measured ones follow
                found["read_s"].append(t1 - t0)
                found["keep_s"].append(t2 - t1)
                found["check_s"].append(check_s)
                found["read_bytes"].append(read.size)
                found["push_bytes"].append(kept.bytes)
        finally:
            engine.stop(sid)
    return {
        "size_mib": size_mib,
        "create_seconds": round(create_seconds, 3),
        **{key: [round(v, 4) for v in values] for key, values in found.items()},
    }


async def _same(provider: LocalProvider) -> LocalProvider:
    return provider


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else 0.0


def result_rows(keeps: list[dict[str, Any]], crashes: list[dict[str, Any]]) -> list[Row]:
    rows: list[Row] = []
    for found in keeps:
        size, read = found["size_mib"], _median(found["read_s"])
        both = round(read + _median(found["keep_s"]), 4)
        small = size == min(k["size_mib"] for k in keeps)
        rows.append(
            Row(
                f"workspace kept: time per checkpoint, {size} MB repo (baseline: not kept)",
                "s",
                read,
                both,
                target=f"<= {KEEP_TARGET_SECONDS:g} s" if small else "",
                at_most=KEEP_TARGET_SECONDS if small else None,
            )
        )
        rows.append(
            Row(
                f"workspace kept: bytes per checkpoint, {size} MB repo (baseline: not kept)",
                "bytes",
                _median(found["read_bytes"]),
                _median(
                    [r + p for r, p in zip(found["read_bytes"], found["push_bytes"], strict=True)]
                ),
            )
        )
    every_keep = [k for found in keeps for k in found["keep_s"]]
    every_check = [c for found in keeps for c in found["check_s"]]
    rows.append(
        Row(
            "workspace kept: the worker's look at the origin per keep (git ls-remote of a "
            "local origin; baseline: the whole keep)",
            "ms",
            round(_median(every_keep) * 1000, 1),
            round(_median(every_check) * 1000, 1),
        )
    )
    off, on = crashes
    rows += [
        Row(
            "workspace kept: work lost per crash, agent pushing only at its end",
            "steps",
            off["lost_steps"],
            on["lost_steps"],
            target="0",
            at_most=0,
        ),
        Row(
            "workspace kept: history events per checkpoint (crash run)",
            "events",
            round(off["history_events"] / off["checkpoints"], 1),
            round(on["history_events"] / on["checkpoints"], 1),
        ),
    ]
    for row in rows:
        row.group = "workspace"
    return rows


Measured = tuple[list[dict[str, Any]], list[dict[str, Any]]]


async def measure(plan: Plan, root: Path, server: tuple[str, str] | None = None) -> Measured:
    keeps = [await measure_keeps(root, size, plan.keeps) for size in plan.sizes_mib]
    crashes = await measure_crashes(root, plan, server)
    return keeps, crashes


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workspace_kept")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: the smoke test")
    parser.add_argument("--keeps", type=int, default=Plan.keeps)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else Plan(keeps=args.keeps)
    began, started_at = time.monotonic(), datetime.now(UTC)
    root = Path(tempfile.mkdtemp(prefix="workspace-bench-"))
    os.environ[HOME_ENV] = str(root / "home")  # sandboxes here, not in ~/.overnight
    try:
        keeps, crashes = await measure(plan, root)
    finally:
        clean_up(root)
    rows = result_rows(keeps, crashes)
    details = {"workspace_kept": {"keeps": keeps, "crashes": crashes}}
    meta = {
        "command": "python -m bench.workspace_kept" + (" --quick" if args.quick else ""),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": ["workspace"],
    }
    results = args.results if not args.quick or args.results != RESULTS_DIR else root_quick()
    _, json_path, _ = save_results(results, rows, details, meta)
    print(json.dumps(details["workspace_kept"]))
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed is not False for row in rows) else 1


def root_quick() -> Path:
    """A quick run's results go to a folder of their own: its figures mean nothing."""
    return Path(tempfile.mkdtemp(prefix="workspace-bench-quick-"))


if __name__ == "__main__":
    import sys

    sys.exit(asyncio.run(main()))
