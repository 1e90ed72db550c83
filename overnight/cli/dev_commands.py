"""`overnight dev` and `overnight demo`: the local dev server (temporal-dev.yaml, or `--port`)
and what runs on it."""

from __future__ import annotations

import argparse
from pathlib import Path

from overnight.cli.commands import Command
from overnight.isolation import Isolation


def _demo_arguments(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--keep-server", action="store_true", help="leave the dev server running")
    demo.add_argument(
        "--isolation",
        choices=("bubblewrap", "none"),
        default="bubblewrap",
        help="how the demo's sandboxes are isolated (none: where bubblewrap cannot run)",
    )
    demo.add_argument(
        "--agent",
        choices=DEMO_AGENTS,
        help="a real coding agent's CLI as the run's agent, killed once mid tool call and "
        "resumed in its session; its run ends in a pull request on a fake GitHub (the CLI "
        "must be installed: bash scripts/install-agent-clis)",
    )
    _server_arguments(demo)


DEMO_AGENTS = ("claude-code", "codex")  # the coding agents the agent demo plays
_DEMO = (
    "The sample agent crashes after opening its pull request, is restarted from its last "
    "checkpoint and finishes with exactly two outside actions; with --agent, a real coding "
    "agent's CLI plays against a scripted fake model API instead."
)
_PORTS = (
    "The dev server's settings come from --config, else ./temporal-dev.yaml (the current "
    "folder's wins), else the repository's. Its port is taken from them, unless --port; when "
    "another program holds the file's port, it moves to the next free one and prints the "
    "`export TEMPORAL_ADDRESS=...` to use."
)


def _server_arguments(parser: argparse.ArgumentParser) -> None:
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


async def run_demo(args: argparse.Namespace) -> int:
    from overnight.cli.demo import run_demo as play
    from overnight.errors import SpecError

    isolation: Isolation = args.isolation
    if args.agent is not None:
        from overnight.cli.demo_agent import run_agent_demo

        if isolation == "none":
            raise SpecError(
                "--agent runs only in isolated sandboxes: leave out --isolation none "
                "(install bubblewrap where it is missing)"
            )
        return await run_agent_demo(
            args.agent, keep_server=args.keep_server, port=args.port, config_path=args.config
        )
    return await play(
        keep_server=args.keep_server, isolation=isolation, port=args.port, config_path=args.config
    )


COMMANDS = (
    Command(
        "dev",
        "start the dev server (temporal-dev.yaml) and a worker",
        _server_arguments,
        run_dev,
        description=_PORTS,
    ),
    Command(
        "demo",
        "a run that recovers from a crash, end to end",
        _demo_arguments,
        run_demo,
        description=f"{_DEMO} {_PORTS}",
    ),
)
