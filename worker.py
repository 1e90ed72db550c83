"""Run an overnight worker.

    python worker.py                    # connect with Temporal's environment configuration
    python worker.py --dev              # first start (or reuse) the dev server, temporal-dev.yaml
    python worker.py --dev --config F   # the dev server from another file

Ctrl-C (SIGINT) or SIGTERM stops the worker gracefully, and the dev server too when this
process started it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from overnight.core.constants import TASK_QUEUE
from overnight.core.errors import OvernightError
from overnight.core.own_packages import shadowed_packages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run an overnight Temporal worker.")
    parser.add_argument(
        "--dev",
        action="store_true",
        help="start (or reuse) the local Temporal dev server first",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="dev server config (default: ./temporal-dev.yaml, else the repo's)",
    )
    parser.add_argument("--task-queue", default=TASK_QUEUE, help="task queue to poll")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    problems = shadowed_packages()
    if problems:  # before the runner imports them, which would fail naming neither
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    from overnight.worker.runner import run_dev, run_with_env_config

    try:
        if args.dev:
            asyncio.run(run_dev(args.config, task_queue=args.task_queue))
        else:
            asyncio.run(run_with_env_config(task_queue=args.task_queue))
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 130
    except ValueError as exc:  # a bad temporal-dev.yaml or environment configuration
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OvernightError as exc:  # no server at the address, a port held by another
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
