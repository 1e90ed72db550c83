"""The real `overnight` command in a newcomer's hands: output piped to `head` ends quietly,
and `--help` has words for every flag of `extend` and for what names a run."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from tests.cli.test_cli import OVERNIGHT


def help_of(*command: str) -> str:
    done = subprocess.run(
        [str(OVERNIGHT), *command, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())  # argparse wraps its lines


def test_output_piped_to_head_ends_without_a_traceback(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("fix it\n" * 12_000)  # a spec of ~100 KB: more than a pipe holds
    start = [str(OVERNIGHT), "start", "--agent", "codex", "--repo", "/srv/app.git"]
    command = shlex.join([*start, "--prompt-file", str(prompt), "--print-spec"])
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | head -c 20"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stderr == ""
    assert done.returncode == 0
    assert done.stdout.startswith("{")


def test_extend_help_says_what_each_flag_adds() -> None:
    words = help_of("extend")
    assert "--restarts N restarts more it may use" in words
    assert "--hours H hours more it may run" in words
    assert "--spend USD dollars more it may spend" in words


def test_every_run_argument_says_either_name_will_do() -> None:
    for command in ("status", "cancel", "extend", "answer", "logs", "inspect"):
        assert "the run's id, or its workflow id (either names it)" in help_of(command), command
