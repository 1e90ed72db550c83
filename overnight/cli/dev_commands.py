"""`overnight dev`: the local dev server (temporal-dev.yaml, or `--port`) and a worker on it.
Its server options are `overnight demo`'s too (overnight/demo/commands.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from overnight.cli.commands import Command

PORTS = (
    "The dev server's settings come from --config, else ./temporal-dev.yaml (the current "
    "folder's wins), else the repository's. Its port is taken from them, unless --port; when "
    "another program holds the file's port, it moves to the next free one and prints the "
    "`export TEMPORAL_ADDRESS=...` to use."
)


def server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=_port,
        help="the dev server's gRPC port (its Web UI: the port + 1000); fails at once if taken",
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="the dev server's settings (temporal-dev.yaml)"
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535, got {port}")
    return port


async def run_dev(args: argparse.Namespace) -> int:
    from overnight.worker.runner import run_dev as serve_dev

    await serve_dev(args.config, port=args.port)
    return 0


COMMANDS = (
    Command(
        "dev",
        "start the dev server (temporal-dev.yaml) and a worker",
        server_arguments,
        run_dev,
        description=PORTS,
    ),
)
