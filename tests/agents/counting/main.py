"""A counting agent for overnight's lease and watching tests. Standard library only.

It makes `AGENT_STEPS` steps (default 8) of `AGENT_STEP_SECONDS` each (default 1), resuming
after the step its checkpoint (`$OVERNIGHT_CHECKPOINT`, written atomically after every step)
says it reached. Every step it *does* is an outside action: a POST to the outside world at
`OVERNIGHT_LEDGER_URL` (overnight/demo/outside_world.py) under a key of its own for each time a
step is done, so the ledger shows each step as many times as it was done (a redone step twice,
a skipped one never). Without a ledger URL it acts on nothing.

Switches:
- `AGENT_QUIET_AFTER=N`, `AGENT_QUIET_SECONDS=S`: after step N's checkpoint, stay alive and
  quiet (no checkpoint, no output) for S seconds;
- `AGENT_DIE_AFTER=N`: in attempt 1 only, exit 3 after step N's work, before its checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any


def write_checkpoint(path: Path, checkpoint: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".cp-", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        json.dump(checkpoint, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def act(step: int, attempt: str) -> None:
    url = os.environ.get("OVERNIGHT_LEDGER_URL")
    if not url:
        return
    run_id = os.environ["OVERNIGHT_RUN_ID"]
    body = {
        "key": f"{run_id}-step-{step}-done-{uuid.uuid4().hex}",
        "action": f"step {step}",
        "detail": f"attempt {attempt}",
    }
    request = urllib.request.Request(
        url.rstrip("/") + "/actions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    with opener.open(request, timeout=10) as answer:
        answer.read()


def main() -> int:
    path = Path(os.environ["OVERNIGHT_CHECKPOINT"])
    attempt = os.environ.get("OVERNIGHT_ATTEMPT", "1")
    steps = int(os.environ.get("AGENT_STEPS", "8"))
    step_seconds = float(os.environ.get("AGENT_STEP_SECONDS", "1"))
    quiet_after = int(os.environ.get("AGENT_QUIET_AFTER", "0"))
    quiet_seconds = float(os.environ.get("AGENT_QUIET_SECONDS", "0"))
    die_after = int(os.environ.get("AGENT_DIE_AFTER", "0"))
    checkpoint: dict[str, Any] = (
        json.loads(path.read_text()) if path.exists() else {"step": 0, "notes": []}
    )
    notes: list[str] = checkpoint["notes"]
    for n in range(int(checkpoint["step"]) + 1, steps + 1):
        time.sleep(step_seconds)
        act(n, attempt)
        if n == die_after and attempt == "1":
            print(f"dying after step {n}, before its checkpoint", flush=True)
            return 3
        notes.append(f"step {n} in attempt {attempt}")
        next_step = f"step {n + 1}" if n < steps else "done"
        write_checkpoint(path, {"step": n, "next": next_step, "notes": notes})
        if n == quiet_after:
            time.sleep(quiet_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
