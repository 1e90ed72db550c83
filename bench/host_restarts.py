"""What a rolling restart of every worker host costs its runs: `python -m bench.host_restarts`.

Two hosts on one machine (tests/chaos/many_hosts.py: a dev server, a `python worker.py` per
host with its own `OVERNIGHT_HOME`), `--runs` local runs of the counting agent (each step one
entry in its outside-action ledger), then each host's worker in turn stopped gracefully (a
deploy) and started again; every run left to finish. Counted per host restart: the runs'
restarts, and the steps done more than once (from the ledgers). Measured twice in the same
run: with host queues (`OVERNIGHT_HOST` of their own), and, as the baseline, the code before
them (a `git worktree` of the commit before `overnight/hosts.py` was added, whose workers send
a sandbox's steps to the shared queue, so to either host). Rows (group `hosts`) go into
bench/results/latest.json beside the suite's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.report import RESULTS_DIR, Row, machine, render_text, save_results
from tests.chaos.many_hosts import TwoHosts
from tests.conftest import REPO_ROOT
from tests.e2e.counting import steps_done

STEPS, STEP_SECONDS = 8, 2.0
SETTLE_SECONDS = 3.0
# A run has ended for the count: done, or out of restarts (it then waits for a person).
ENDED = ("finished", "failed", "cancelled", "needs_attention")
WAIT_SECONDS = 240


@dataclass
class Rolled:
    """One rolling restart of both hosts under `runs` runs."""

    runs: int
    host_restarts: int
    restarts: int
    steps_redone: int
    unfinished: int
    seconds: float

    def per_host_restart(self, value: int) -> float:
        return round(value / self.host_restarts, 2)


@contextlib.contextmanager
def code_before(folder: Path) -> Iterator[Path]:
    """A checkout of the commit before host queues, removed afterwards."""
    # The path hosts.py was added at: it moved to overnight/core/ later, and the commit adding
    # that path is the move, not host queues.
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "overnight/hosts.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        raise SystemExit("overnight/hosts.py has no commit adding it: no baseline to check out")
    tree = folder / "code-before"
    git = ["git", "-C", str(REPO_ROOT), "worktree"]
    subprocess.run([*git, "add", "--detach", str(tree), f"{added[-1]}^"], check=True)
    try:
        yield tree
    finally:
        subprocess.run([*git, "remove", "--force", str(tree)], check=False)


async def roll(folder: Path, runs: int, code: Path = REPO_ROOT) -> Rolled:
    began = time.monotonic()
    async with TwoHosts(folder, repo_root=code) as stack:
        assert stack.client is not None
        for host in stack.hosts.values():
            await host.start()
        run_ids = [await stack.start_run(f"r{i + 1}", STEPS, STEP_SECONDS) for i in range(runs)]
        for run_id in run_ids:
            await stack.until_status(run_id, lambda s: s.state == "running", "running", 120)
        for host in stack.hosts.values():  # one at a time, as a deploy rolls
            host.sigterm()
            await host.start()
            await asyncio.sleep(SETTLE_SECONDS)
        restarts = redone = unfinished = 0
        for run_id in run_ids:
            try:
                status = await stack.until_status(
                    run_id, lambda s: s.state in ENDED, "ended", WAIT_SECONDS
                )
            except AssertionError:
                status = await stack.status(run_id)
            unfinished += status.state != "finished"
            restarts += status.restarts_used
            redone += sum(n - 1 for n in steps_done(stack.ledgers[run_id]).values() if n > 1)
    return Rolled(runs, 2, restarts, redone, unfinished, time.monotonic() - began)


def result_rows(before: Rolled, after: Rolled) -> list[Row]:
    note = (
        f"{after.runs} runs of {STEPS} steps of {STEP_SECONDS:g} s on 2 hosts, each host's worker "
        f"SIGTERMed and started again in turn ({after.unfinished} unfinished); baseline: the "
        f"code before host queues ({before.unfinished} unfinished)"
    )
    rows = [
        Row(
            "rolling restart of every host: restarts per host restart",
            "restarts",
            before.per_host_restart(before.restarts),
            after.per_host_restart(after.restarts),
            target="0",
            at_most=0,
            note=note,
        ),
        Row(
            "rolling restart of every host: steps redone per host restart",
            "steps",
            before.per_host_restart(before.steps_redone),
            after.per_host_restart(after.steps_redone),
            target="0",
            at_most=0,
            note=note + " (from the outside-action ledgers)",
        ),
    ]
    for row in rows:
        row.group = "hosts"
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.host_restarts")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    began, started_at = time.monotonic(), datetime.now(UTC)
    folder = Path(tempfile.mkdtemp(prefix="overnight-bench-hosts-"))
    after = asyncio.run(roll(folder / "after", args.runs))
    with code_before(folder) as code:
        before = asyncio.run(roll(folder / "before", args.runs, code))
    rows = result_rows(before, after)
    details: dict[str, Any] = {"host_restarts": {"before": vars(before), "after": vars(after)}}
    meta = {
        "command": "python -m bench.host_restarts"
        + (f" --runs {args.runs}" if args.runs != 6 else ""),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": ["hosts"],
    }
    print(json.dumps(details))  # before save_results, which adds the other benchmarks' to it
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
