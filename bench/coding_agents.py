"""What a crash of a real coding-agent CLI costs: `python -m bench.coding_agents`.

A task of `calls` tool calls (10) run by the real pinned CLI (Claude Code; Codex too with
`--kind codex`) in bubblewrap against the fake model API (`fakes.model_api`), as
tests/agent_clis runs them. In each sample the CLI is SIGKILLed during tool call k, once its
session file records the call (Claude Code writes its session a little after a tool starts:
killed before that, the resumed session has lost the call), at several k. Then, in the same run:

- **overnight's way**: the run's agent is overnight's adapter
  (overnight/agent_kit/coding_agent.py), which sees its CLI die, ends what it left running and
  resumes the same session (`--resume ID`, `codex exec resume ID`); with `--resume-by cli` the
  bench resumes the session itself the way the adapter does, for a tree without the adapter;
- **the baseline**: a naive loop that runs `claude -p TASK` (`codex exec TASK`) again from
  scratch when it dies, in the same workspace.

The model is the fake, answering as a function of the conversation (`TaskModel`): the next
call is the first of 1..N whose result the conversation does not hold, then the final text. So
a run started from scratch is asked for every call again, and a resumed session for the call
the kill interrupted (its result says it was interrupted: a real model asks for it again),
then the rest. Each call appends to `steps.txt` and prints `step i ok`; call k first sleeps
until the bench has killed its CLI.

Rows (group `codingagents`), per CLI, median and max over the crashes:
- model turns redone per crash: requests beyond the N + 1 of a clean run (target <= 1);
- crash to the CLI working again: the SIGKILL to the next CLI's first model request
  (target <= 2 s); and, for context, to the request that asks for call k again (where it was);
- spend lost per crash: the redone requests' tokens at the CLI's list price. The fake reports
  each request's input tokens as its body's size / 4 (the rule of thumb for English and
  JSON), uncached, so the figure is what the redone turns would cost without prompt caching.

Here: the whole run (each kind's CLI installed and warmed, the samples in turn) and its
command line. The task and its model are bench/coding_agents_task.py, one sample
bench/coding_agents_samples.py, the rows bench/coding_agents_rows.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.coding_agents_rows import GROUP, result_rows
from bench.coding_agents_samples import (
    BenchError,
    ResumeBy,
    Sample,
    Way,
    measure_naive,
    measure_overnight,
    new_sandbox,
)
from bench.report import RESULTS_DIR, machine, render_text, save_results
from overnight.core.agent_kinds import agent_cli
from overnight.worker.agent_clis import InstallError, check, install

KINDS = ("claude-code", "codex")
CALLS = 10
CRASH_AT = (2, 4, 6, 8, 10)
# Where the pinned CLIs are installed when --agents-home is not given (scripts/test's folder).
AGENTS_HOME_ENV = "OVERNIGHT_TEST_AGENTS_HOME"


def installed_folder(kind: str, home: Path) -> Path:
    """The pinned CLI's install under `home` (installed now from the npm registry when it is
    not there)."""
    cli = agent_cli(kind)
    ready = check(cli, home, verify=False)
    if ready.ready:
        return install(cli, home).folder  # there already: only looked at
    try:
        return install(cli, home).folder
    except InstallError as error:
        raise BenchError(f"{cli.npm_spec} is not installed under {home}: {error}") from None


def _warm(kind: str, folder: Path, root: Path) -> None:
    """The CLI's binary read once (`--version` in a sandbox), so the first sample does not
    pay for the page cache alone."""
    sandbox = new_sandbox(root, agent_cli(kind), folder)
    argv, env = sandbox.command([sandbox.executable_inside, "--version"], {})
    subprocess.run(argv, env=env, cwd=sandbox.work, capture_output=True, timeout=120)


def adapter_available() -> bool:
    try:
        import tests.agent_clis.adapter  # noqa: F401
    except ImportError:
        return False
    kit = Path(__file__).resolve().parent.parent / "overnight" / "agent_kit" / "coding_agent.py"
    return kit.is_file()


def measure(
    kinds: Sequence[str],
    home: Path,
    calls: int = CALLS,
    crash_at: Sequence[int] = CRASH_AT,
    resume_by: ResumeBy = "adapter",
    out: Any = print,
) -> list[Sample]:
    """Every sample: per kind and crash point, overnight's way then the naive loop."""
    if any(not 1 <= k <= calls for k in crash_at):
        raise ValueError(f"crash points are calls 1..{calls}")
    samples: list[Sample] = []
    base = Path(tempfile.mkdtemp(prefix="overnight-bench-agents-"))
    try:
        for kind in kinds:
            folder = installed_folder(kind, home)
            _warm(kind, folder, base / f"{kind}-warm")
            for index, k in enumerate(crash_at):
                ways: tuple[Way, Way] = ("overnight", "naive")
                for way in ways if index % 2 == 0 else ways[::-1]:  # neither always first
                    root = base / f"{kind}-{k}-{way}"
                    if way == "overnight":
                        sample = measure_overnight(kind, folder, root, calls, k, resume_by)
                    else:
                        sample = measure_naive(kind, folder, root, calls, k)
                    out(json.dumps(asdict(sample)))
                    samples.append(sample)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.coding_agents")
    parser.add_argument("--kind", action="append", choices=KINDS, help="default: both")
    parser.add_argument("--calls", type=int, default=CALLS, help="tool calls of the task")
    parser.add_argument(
        "--crash-at",
        type=int,
        action="append",
        help=f"kill during this tool call (repeatable; default {', '.join(map(str, CRASH_AT))})",
    )
    parser.add_argument(
        "--resume-by",
        choices=("adapter", "cli"),
        help="overnight's way: the adapter (default, when the tree has it) or the CLI's resume",
    )
    parser.add_argument(
        "--agents-home",
        type=Path,
        help=f"where the pinned CLIs are installed (default ${AGENTS_HOME_ENV} or "
        "~/.cache/overnight-test-agents; installed there when missing)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder for latest.json")
    args = parser.parse_args(argv)
    began, started_at = time.monotonic(), datetime.now(UTC)
    home = args.agents_home or Path(
        os.environ.get(AGENTS_HOME_ENV) or Path.home() / ".cache" / "overnight-test-agents"
    )
    resume_by: ResumeBy = args.resume_by or ("adapter" if adapter_available() else "cli")
    kinds = args.kind or list(KINDS)
    crash_at = args.crash_at or [k for k in CRASH_AT if k <= args.calls]
    samples = measure(kinds, home, args.calls, crash_at, resume_by)
    rows = result_rows(samples)
    details: dict[str, Any] = {"coding_agents": [asdict(s) for s in samples]}
    given = sys.argv[1:] if argv is None else argv
    meta = {
        "command": " ".join(["python -m bench.coding_agents", *given]),
        "machine": machine(),
        "started_at": started_at.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - began),
        "metrics": [GROUP],
    }
    _, json_path, _ = save_results(args.results, rows, details, meta)
    print(render_text(rows))
    print(f"wrote {json_path}")
    return 0 if all(row.passed is not False for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
