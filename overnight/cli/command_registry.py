"""Every `overnight` command, in the order `overnight --help` lists them: each command module's
`COMMANDS` (overnight/cli/commands.py), gathered here (the demo's from its own package,
overnight/demo/). main.py builds its parser and dispatches from this list alone, so a
command is named once, beside its code."""

from __future__ import annotations

from overnight.cli import (
    agents,
    codec_server,
    console,
    dev_commands,
    disk,
    forensics,
    replay_check,
    report,
    run_commands,
    schedule,
    start_command,
    workspace,
)
from overnight.cli.commands import Command
from overnight.demo import commands as demo_commands

COMMANDS: tuple[Command, ...] = (
    *start_command.COMMANDS,
    *run_commands.COMMANDS,
    *disk.COMMANDS,
    *report.COMMANDS,
    *forensics.COMMANDS,
    *schedule.COMMANDS,
    *replay_check.COMMANDS,
    *codec_server.COMMANDS,
    *console.COMMANDS,
    *agents.COMMANDS,
    *workspace.COMMANDS,
    *dev_commands.COMMANDS,
    *demo_commands.COMMANDS,
)
_BY_NAME = {command.name: command for command in COMMANDS}
if len(_BY_NAME) != len(COMMANDS):  # a second command of one name would be shadowed
    raise RuntimeError(f"a command name is registered twice: {[c.name for c in COMMANDS]}")


def command(name: str) -> Command:
    return _BY_NAME[name]
