"""Commands are named once (overnight/cli/command_registry.py): `overnight --help` lists every
registered command, each once and in the registry's order; the parser has no command the
registry lacks; and main.py names none (it builds and dispatches from the registry alone)."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
from pathlib import Path

from overnight.cli import main as cli_main
from overnight.cli.command_registry import COMMANDS, command
from overnight.cli.main import build_parser
from tests.cli.test_cli import OVERNIGHT

# A command's line in the help's `commands:` listing: four spaces, then its name.
LISTED = re.compile(r"^    (\S+)")


def test_help_lists_every_registered_command_once() -> None:
    names = [each.name for each in COMMANDS]
    assert len(set(names)) == len(names), names
    done = subprocess.run([str(OVERNIGHT), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listing = done.stdout.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0]
    listed = [found.group(1) for line in listing.splitlines() if (found := LISTED.match(line))]
    assert listed == names
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(commands.choices) == names
    assert all(command(name).name == name for name in names)


def test_main_names_no_command() -> None:
    source = Path(cli_main.__file__).read_text(encoding="utf-8")
    strings = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert strings.isdisjoint(each.name for each in COMMANDS)
