"""An agent for the console's tests: it writes what `CONSOLE_NEXT` and `CONSOLE_NOTE` say
into its checkpoint (the list shows the next step), then does what `CONSOLE_MODE` says:

- `ask`: asks `CONSOLE_QUESTION` with the choices in `CONSOLE_CHOICES` (joined by `|`), and
  finishes with the answer;
- `crash`: exits 3 (with no restarts left, the run needs attention);
- `sit`: sleeps, saving its checkpoint now and then (a running run).
"""

from __future__ import annotations

import os
import time

from overnight_agent import Checkpoint, ask, finish


def main() -> int:
    checkpoint = Checkpoint.load()
    checkpoint.step = max(checkpoint.step, 1)
    checkpoint.next = os.environ.get("CONSOLE_NEXT", "sit and wait")
    note = os.environ.get("CONSOLE_NOTE")
    if note and note not in checkpoint.notes:
        checkpoint.notes.append(note)
    checkpoint.save()
    mode = os.environ.get("CONSOLE_MODE", "sit")
    if mode == "crash":
        return 3
    if mode == "ask":
        choices = [c for c in os.environ.get("CONSOLE_CHOICES", "yes|no").split("|") if c]
        answer = ask(os.environ.get("CONSOLE_QUESTION", "Go on?"), choices)
        checkpoint.step += 1
        checkpoint.next = "done"
        checkpoint.save()
        finish("answered", {"answer": answer})
        return 0
    while True:
        time.sleep(5)
        checkpoint.save()


if __name__ == "__main__":
    raise SystemExit(main())
