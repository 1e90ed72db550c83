"""`overnight demo`: its line in the help, its options and what runs it (the sample agent's
run, overnight/demo/sample_demo.py, or with `--agent` a coding agent's,
overnight/demo/agent_demo.py). Gathered by overnight/cli/command_registry.py; the demo's
modules are imported only when it runs, so the help stays quick."""

from __future__ import annotations

import argparse

from overnight.cli.commands import Command
from overnight.cli.dev_commands import PORTS, server_arguments
from overnight.core.isolation import Isolation

DEMO_AGENTS = ("claude-code", "codex")  # the coding agents the agent demo plays
_DEMO = (
    "The sample agent crashes after opening its pull request, is restarted from its last "
    "checkpoint and finishes with exactly two outside actions; with --agent, a real coding "
    "agent's CLI plays against a scripted fake model API instead."
)


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
    server_arguments(demo)


async def run_demo(args: argparse.Namespace) -> int:
    from overnight.core.errors import SpecError
    from overnight.demo.sample_demo import run_demo as play

    isolation: Isolation = args.isolation
    if args.agent is not None:
        from overnight.demo.agent_demo import run_agent_demo

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
        "demo",
        "a run that recovers from a crash, end to end",
        _demo_arguments,
        run_demo,
        description=f"{_DEMO} {PORTS}",
    ),
)
