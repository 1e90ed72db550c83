"""The benchmark command: `python -m bench [--quick] [--only METRIC ...] [--results DIR]`.

Runs overnight and the naive baseline side by side, prints the table (metric, baseline,
overnight, ratio, target, pass/fail) and writes `latest.json` and `latest.md` to
bench/results (a full run) or the run's temporary folder (`--quick`, unless `--results`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from bench.run import METRICS, Options, run_bench


def parse_args(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="overnight's benchmarks against a naive baseline"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and short polls: a smoke test"
    )
    parser.add_argument(
        "--only", action="append", choices=METRICS, help="run only this metric (repeatable)"
    )
    parser.add_argument("--results", type=Path, help="folder for latest.json and latest.md")
    parser.add_argument("--address", help="use this Temporal server instead of starting one")
    parser.add_argument("--namespace", default="default")
    args = parser.parse_args(argv)
    return Options(
        quick=args.quick,
        only=set(args.only or METRICS),
        results_dir=args.results,
        address=args.address,
        namespace=args.namespace,
    )


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run_bench(parse_args(argv)))
