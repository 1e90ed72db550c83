"""An agent that asks a person through the agent kit, for the end-to-end tests of `ask()`.

Step 1 saves its checkpoint (with this process's pid) and reports some model spend; then it
asks `AGENT_QUESTION` with the choices yes/no, and once answered saves step 2 with the answer
and its pid again (the same process goes on: the pids match) and hands over its results.

`AGENT_MODE=spend`: eight steps of a second each, each noted in the checkpoint with the pid
that did it; after step 2 it reports `AGENT_SPEND_USD` of model spend (past a small budget).
"""

from __future__ import annotations

import os
import time

from overnight_agent import Checkpoint, ask, finish, report_usage


def spend(checkpoint: Checkpoint) -> int:
    while checkpoint.step < 8:
        time.sleep(1)
        checkpoint.step += 1
        done = checkpoint.data.setdefault("done_by", [])
        done.append([checkpoint.step, os.getpid()])
        checkpoint.save()
        if checkpoint.step == 2:
            report_usage(float(os.environ.get("AGENT_SPEND_USD", "2")), model="test-model")
    finish("spent", {"steps": str(checkpoint.step)})
    return 0


def main() -> int:
    checkpoint = Checkpoint.load()
    if os.environ.get("AGENT_MODE") == "spend":
        return spend(checkpoint)
    if checkpoint.step < 1:
        checkpoint.step = 1
        checkpoint.next = "ask a person"
        checkpoint.data["pid_before"] = os.getpid()
        checkpoint.save()
    report_usage(0.25, input_tokens=1200, output_tokens=300, model="test-model")
    answer = ask(os.environ.get("AGENT_QUESTION", "Apply the migration?"), ["yes", "no"])
    checkpoint.step = 2
    checkpoint.next = "done"
    checkpoint.data["answer"] = answer
    checkpoint.data["pid_after"] = os.getpid()
    checkpoint.save()
    finish("asked and answered", {"answer": answer, "pid": str(os.getpid())})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
