"""Help a person can read (issue 51): every command has a description line and every option and
argument a help text (a walk over the parser, so a new one without fails here); options and
arguments in any order where argparse allows it; the README names every command."""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Iterator
from pathlib import Path

from overnight.cli.main import build_parser
from tests.cli.test_cli import NOWHERE, OVERNIGHT

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """Every command and verb (`schedule create`), its parser and its line in its listing."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            for name, command in action.choices.items():
                yield (*path, name), command, listed.get(name)
                yield from _commands(command, (*path, name))


def test_every_command_has_a_description_and_every_option_a_help_text() -> None:
    missing: list[str] = []
    for path, command, listed in _commands(build_parser()):
        name = " ".join(path)
        if not listed:
            missing.append(f"{name}: no line in its listing")
        if not command.description:
            missing.append(f"{name}: no description")
        for action in command._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            if not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_a_commands_help_begins_with_what_it_does() -> None:
    done = subprocess.run(
        [str(OVERNIGHT), "status", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    usage, description = done.stdout.split("\n\n")[:2]
    assert usage.startswith("usage: overnight status")
    assert description == "Show one run."


def test_options_may_come_between_arguments() -> None:
    parser = build_parser()
    usual = parser.parse_args(["inspect", "--attempt", "1", "RUN", "app/x.py"])
    for argv in (
        ["inspect", "RUN", "--attempt", "1", "app/x.py"],
        ["inspect", "RUN", "app/x.py", "--attempt", "1"],
    ):
        assert parser.parse_args(argv) == usual
    # The real command parses it and goes on to connect (nothing listens there: exit 1).
    done = subprocess.run(
        [str(OVERNIGHT), *NOWHERE, "inspect", "RUN", "--attempt", "1", "app/x.py"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "unrecognized arguments" not in done.stderr


def test_overnights_own_options_after_a_command_are_said_to_go_before_it() -> None:
    # argparse takes --address, --namespace and --debug before the command only: a newcomer's
    # `overnight list --open --address HOST:PORT` was told "unrecognized arguments" (issue 51).
    done = subprocess.run(
        [str(OVERNIGHT), "list", "--open", "--address", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "overnight: --address goes before the command: overnight --address ... COMMAND ...\n"
    )


def test_the_readme_names_every_command_and_where_the_rest_is() -> None:
    text = README.read_text()
    commands = {path[0] for path, _, _ in _commands(build_parser())}
    assert sorted(c for c in commands if f"overnight {c}" not in text) == []
    assert "overnight --help" in text
