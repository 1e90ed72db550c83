"""Run the chaos harness from the command line and print its table.

    python -m tests.chaos --full          # 20 runs, worker kills throughout, a dev server
                                          # restart, a one-minute Runtime API storm
    python -m tests.chaos                 # the reduced size the test suite runs
    python -m tests.chaos --runs 8 --keep # a custom size; keep the folder to look at
    python -m tests.chaos --takeover      # only the take-over times (about 6 minutes)

After the chaos run, on a stack of its own, a worker holding watches is stopped gracefully
(SIGTERM) and, at full size, another is SIGKILLed: how soon another worker holds each of
their runs' watches (`tests/chaos/takeover.py`) is in the table.

Exit code 0 when every run finished with no duplicate action, no lost checkpoint, no sandbox
left running and no restart caused by a transient fault; 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from tests.chaos.harness import run_chaos
from tests.chaos.plan import FULL, REDUCED
from tests.chaos.takeover import measure_takeover
from tests.chaos.verdict import render_table, render_takeover

# Runs on the take-over stack: spread over its two workers, each holds some.
TAKEOVER_RUNS = 6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--full", action="store_true", help="the full size (20 runs)")
    parser.add_argument("--runs", type=int, help="number of concurrent runs")
    parser.add_argument("--seed", type=int, help="seed for fault placement")
    parser.add_argument("--folder", type=Path, help="where to keep state (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the folder afterwards")
    parser.add_argument(
        "--takeover", action="store_true", help="only the take-over times (SIGTERM and SIGKILL)"
    )
    args = parser.parse_args(argv)
    size = FULL if args.full else REDUCED
    if args.runs is not None:
        size = dataclasses.replace(size, runs=args.runs)
    if args.seed is not None:
        size = dataclasses.replace(size, seed=args.seed)
    logging.basicConfig(level=logging.WARNING)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="overnight-chaos-"))
    if args.takeover:
        takeover = asyncio.run(measure_takeover(folder / "takeover", runs=TAKEOVER_RUNS))
        print()
        print(render_takeover(takeover))
        problems = takeover.problems()
        report_ok = not problems
    else:
        report = asyncio.run(run_chaos(size, folder))
        report.takeover = asyncio.run(
            measure_takeover(folder / "takeover", runs=TAKEOVER_RUNS, sigkill=args.full)
        )
        print()
        print("\n".join(report.run_lines()))
        print()
        print(render_table(report))
        problems = report.problems()
        report_ok = report.ok()
    for line in problems:
        print(f"problem: {line}")
    if args.keep or problems:
        print(f"state kept in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if report_ok else 1


if __name__ == "__main__":
    sys.exit(main())
