"""A long-running agent for the provider-cost benchmark: it checkpoints on a clock, forever.

`TICK_SECONDS="20 30"`: a checkpoint every 20-30 s (drawn each time), like an agent that
finishes a small piece of work every half minute; `TICK_SECONDS=quiet`: one checkpoint at the
start, then nothing (an agent waiting on its model or a long build). Each checkpoint is written
atomically (a temporary file renamed over it) and padded to `CHECKPOINT_BYTES` (default 4096)
with notes, as a real agent's plan and notes would be. It runs until it is stopped.
Standard library only.
"""

from __future__ import annotations

import json
import os
import random
import signal
import tempfile
import time
from pathlib import Path


def write(path: Path, step: int, size: int) -> None:
    checkpoint = {"step": step, "done": [f"piece {n}" for n in range(step)], "next": "more"}
    checkpoint["notes"] = []
    text = json.dumps(checkpoint)
    if len(text) < size:
        checkpoint["notes"] = ["x" * max(0, size - len(text) - 4)]
        text = json.dumps(checkpoint)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, path)


def main() -> None:
    path = Path(os.environ.get("OVERNIGHT_CHECKPOINT", "/workspace/checkpoint.json"))
    size = int(os.environ.get("CHECKPOINT_BYTES", "4096"))
    tick = os.environ.get("TICK_SECONDS", "20 30")
    step = 0
    try:
        step = int(json.loads(path.read_text())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    step += 1
    write(path, step, size)
    if tick == "quiet":
        while True:
            signal.pause()
    low, high = (float(part) for part in tick.split())
    rng = random.Random()
    while True:
        time.sleep(rng.uniform(low, high))
        step += 1
        write(path, step, size)


if __name__ == "__main__":
    main()
