"""An agent whose every word is written to drive the terminal of whoever reads it, for
tests/cli/test_agent_bytes_on_the_terminal.py: the same bytes (HOSTILE) in all it can put
before an operator. On the agent kit; standard library only.

Attempt 1 prints HOSTILE on stdout and stderr, writes `notes.md` holding it and a file whose
name holds it into its `cwd`, saves checkpoint 1 (its next step and a note are HOSTILE), holds
until the run has kept that workspace (with `KEPT_IN`, "<repo>|<run id>": one ref of the run's
on the origin, asked with `git ls-remote`), then asks a question that is HOSTILE with a choice
that is HOSTILE too. Answered, it saves checkpoint 2, prints HOSTILE as its last words and
crashes (exit 3). Attempt 2 prints HOSTILE, hands over a summary and an output that are HOSTILE
(the kit's `finish()`) and exits 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from overnight_agent import Checkpoint, ask, finish

# Retitle the window, clear the screen, home the cursor, print red, a C1 CSI clearing it again,
# a right-to-left override, a zero-width space, a bare carriage return, a bell.
HOSTILE = (
    "\x1b]0;pwned\x07\x1b[2J\x1b[H\x1b[1;31mALL TESTS PASSED, SAFE TO MERGE\x1b[0m"
    "\x9b2J\u202egnp.exe\u200b\rover\x07"
)


def kept(repo_and_run: str) -> int:
    repo, run = repo_and_run.split("|")
    listed = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-remote", repo, f"refs/overnight/{run}/*"],
        capture_output=True,
        text=True,
    )
    return len(listed.stdout.splitlines())


def say(text: str) -> None:
    print(f"work: {text}", flush=True)
    print(f"warn: {text}", file=sys.stderr, flush=True)


def main() -> int:
    checkpoint = Checkpoint.load()
    say(HOSTILE)
    if os.environ.get("OVERNIGHT_ATTEMPT") != "1":
        finish(HOSTILE, {"pr": HOSTILE})
        return 0
    app = Path.cwd()
    (app / "notes.md").write_text(f"# Notes\n\n{HOSTILE}\n\ttabbed line\n", encoding="utf-8")
    (app / f"x{HOSTILE}.md").write_text("named\n", encoding="utf-8")
    waits = os.environ.get("KEPT_IN", "")
    before = kept(waits) if waits else 0
    checkpoint.step, checkpoint.next = 1, HOSTILE
    checkpoint.note(HOSTILE)
    checkpoint.save()
    deadline = time.monotonic() + 60
    while waits and kept(waits) <= before and time.monotonic() < deadline:
        time.sleep(0.3)
    ask(f"Deploy? {HOSTILE}", ["yes", f"no {HOSTILE}"])
    checkpoint.step = 2
    checkpoint.save()
    say(HOSTILE)
    return 3


if __name__ == "__main__":
    raise SystemExit(main())
