"""`overnight push RUN` (issue 50): tries again now what a run waits on to deliver its work
(its refused push, a kept workspace's, its pull request, a look at its CI), as `extend` does,
without adding to the budget; and `extend --ci-rounds N`. The parser, the help a person
reads, and the real command (nothing listens at its address: it parses and goes on to
connect). tests/workflows/test_agent_run_push_again.py holds what the run does with it."""

from __future__ import annotations

import subprocess

from overnight.cli.main import build_parser
from overnight.cli.render import extension_text
from overnight.core.models import BudgetExtension
from tests.cli.test_cli import NOWHERE, OVERNIGHT


def test_push_takes_a_run_and_says_what_it_does() -> None:
    args = build_parser().parse_args(["push", "my-run"])
    assert (args.command, args.run_id) == ("push", "my-run")
    done = subprocess.run(
        [str(OVERNIGHT), "push", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    usage, description = done.stdout.split("\n\n")[:2]
    assert usage.startswith("usage: overnight push")
    assert description.startswith("Try again now what a run waits on to deliver its work")
    assert "without adding to the budget" in " ".join(description.split())


def test_the_real_push_command_parses_and_connects() -> None:
    done = subprocess.run(
        [str(OVERNIGHT), *NOWHERE, "push", "my-run"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "unrecognized arguments" not in done.stderr and "invalid choice" not in done.stderr


def test_extend_gives_ci_rounds() -> None:
    args = build_parser().parse_args(["extend", "my-run", "--ci-rounds", "2"])
    assert args.ci_rounds == 2
    assert extension_text(BudgetExtension(ci_rounds=2)) == "2 CI rounds"
    done = subprocess.run(
        [str(OVERNIGHT), *NOWHERE, "extend", "my-run", "--ci-rounds", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--ci-rounds" in done.stderr
