"""`overnight`: start, watch, steer and clean up agent runs. The parser is built from the
commands' registry (overnight/cli/command_registry.py), and the command asked for is run.

Exit codes: 0 ok, 2 bad input (one line saying why), 1 anything else (one line, or the
traceback with --debug).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from overnight.cli.command_registry import COMMANDS, command
from overnight.cli.commands import BAD_INPUT, FAILED, OK
from overnight.cli.error_text import one_line
from overnight.cli.help_texts import describe_every_command
from overnight.cli.terminal_output import guarded

# overnight's own options, before any command.
GLOBAL_OPTIONS = ("--address", "--namespace", "--debug")


class _Parser(argparse.ArgumentParser):
    _intermixing = False

    def error(self, message: str) -> NoReturn:
        # One line instead of argparse's usage block.
        if message.startswith("unrecognized arguments"):
            misplaced = [o for o in GLOBAL_OPTIONS if o in message.split()]
            if misplaced:  # `overnight list --address X`: argparse takes them first only
                self.exit(
                    BAD_INPUT,
                    f"overnight: {', '.join(misplaced)} {'goes' if len(misplaced) == 1 else 'go'} "
                    "before the command: "
                    f"overnight {misplaced[0]} ... COMMAND ...\n",
                )
        self.exit(BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Options and arguments in any order (`inspect RUN --attempt 1 PATH` as well as
        `inspect --attempt 1 RUN PATH`), where argparse allows it: not in a parser of commands."""
        commands = any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions)
        if commands or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # its own two passes come back here
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="overnight",
        description="Keep an AI agent's long run going.",
        epilog="overnight COMMAND --help says what a command takes.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--address", help="Temporal host:port (default: env config)")
    parser.add_argument("--namespace", help="Temporal namespace (default: env config)")
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, title="commands", metavar="COMMAND"
    )
    for each in COMMANDS:
        each.add_to(commands)
    describe_every_command(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code. As the console script (`argv` None) it
    exits the process itself, skipping interpreter teardown: the Temporal client's native
    threads can abort a finalizing interpreter (temporalio/sdk-python#300), which would turn
    a clean exit code into a crash."""
    code = run(argv)
    if argv is None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # `overnight list | head`: the reader has all it wanted
            pass
        sys.stderr.flush()
        os._exit(code)
    return code


def run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check = command(args.command).check
    if check is not None and (problem := check(args)) is not None:
        parser.error(problem)
    # Whatever a command writes, on stdout or stderr, an agent may have written part of it:
    # all of it goes through one rule (overnight/cli/terminal_output.py).
    document = getattr(args, "json", False) or getattr(args, "print_spec", False)
    with guarded(json_out=bool(document)):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_dispatch(args))
    except KeyboardInterrupt:
        return FAILED
    except BrokenPipeError:
        # The reader of our output went away (`| head`): nothing is wrong, nothing more to say.
        # Later writes to the closed pipe go nowhere instead of failing again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        bad = getattr(err, "bad_input", False)
        print(f"overnight: {one_line(err)}", file=sys.stderr)
        return BAD_INPUT if bad else FAILED


async def _dispatch(args: argparse.Namespace) -> int:
    return await command(args.command).run(args)
