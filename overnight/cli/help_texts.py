"""What `overnight --help` and each command's own `--help` say: the texts several commands
share, and a description line for every command (tests/cli/test_help.py holds every command
and option to having one)."""

from __future__ import annotations

import argparse

from overnight.core.constants import TASK_QUEUE

JSON_HELP = "print one JSON document instead of text"
TASK_QUEUE_HELP = f"the task queue the run's workers poll (default: {TASK_QUEUE})"


def describe_every_command(parser: argparse.ArgumentParser) -> None:
    """Give each command (and each verb of one, `schedule create`) that has no description of
    its own its listing's line as its description, so its `--help` begins by saying what it
    does."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        said = {choice.dest: choice.help for choice in action._choices_actions}
        for name, command in action.choices.items():
            about = said.get(name)
            if command.description is None and about:
                command.description = about[0].upper() + about[1:] + "."
            describe_every_command(command)
