"""What an `overnight` command is: its name, its line in `overnight --help`, what it takes and
what runs it, said once, beside its code. overnight/cli/command_registry.py gathers them and
main.py builds the parser and dispatches from that one list; nothing else names a command.

Exit codes: 0 ok, 2 bad input (one line saying why), 1 anything else.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from overnight.core.errors import OvernightError

OK, FAILED, BAD_INPUT = 0, 1, 2

Handler = Callable[[argparse.Namespace], Awaitable[int]]


class BadInput(OvernightError):
    bad_input = True


@dataclass(frozen=True)
class Command:
    name: str
    help: str  # its line in `overnight --help` (and its description, unless it has its own)
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler
    description: str | None = None
    # A misuse argparse cannot see (options that need each other): said as argparse says its
    # own, before anything runs (exit 2).
    check: Callable[[argparse.Namespace], str | None] | None = None

    def add_to(self, commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
        parser = commands.add_parser(self.name, help=self.help, description=self.description)
        self.add_arguments(parser)
