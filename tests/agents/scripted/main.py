"""A scripted agent for overnight's hostile-input tests. Standard library only.

`AGENT_MODE` says what it does; every mode writes its checkpoint atomically, as the agent
contract asks, to `$OVERNIGHT_CHECKPOINT`:

- `bad-binary`, `bad-truncated`, `bad-huge`, `bad-symlink`: write a good checkpoint, wait,
  replace it with a bad one (not UTF-8 / cut-off JSON / 10 MB / a symlink to
  `$AGENT_OUTSIDE_FILE` outside the sandbox), wait, and exit 0.
- `secret-proof`: write a checkpoint holding the sha256 of the secret variable named by
  `AGENT_SECRET_NAME` (never the value), and exit 0.
- `last-words`: write a first checkpoint, wait, write a final one, and exit 0.

`AGENT_HOLD` (seconds, default 3) is how long each checkpoint stays before the next move.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

GOOD = {"step": 1, "done": ["good step"], "next": "the bad write", "notes": ["good checkpoint"]}
HUGE_BYTES = 10 * 1024 * 1024


def write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".cp-", dir=path.parent)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def link(path: Path, target: str) -> None:
    tmp = path.parent / f".cp-link-{os.getpid()}"
    os.symlink(target, tmp)
    os.replace(tmp, path)


def bad_version(mode: str, good: bytes) -> bytes | None:
    if mode == "bad-binary":
        return b"\xff\xfe\x00\x9c not text \x80" * 64
    if mode == "bad-truncated":
        return good[: len(good) // 2]
    if mode == "bad-huge":
        return b'{"pad": "' + b"x" * HUGE_BYTES + b'"}'
    return None


def main() -> int:
    mode = os.environ["AGENT_MODE"]
    hold = float(os.environ.get("AGENT_HOLD", "3"))
    path = Path(os.environ["OVERNIGHT_CHECKPOINT"])
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "secret-proof":
        value = os.environ.get(os.environ["AGENT_SECRET_NAME"], "")
        proof = {"step": 1, "done": ["proof"], "next": "done", "secret_sha256": ""}
        proof["secret_sha256"] = hashlib.sha256(value.encode()).hexdigest() if value else ""
        write(path, json.dumps(proof).encode())
        print(f"secret present: {bool(value)}", flush=True)
        return 0
    if mode == "last-words":
        write(path, json.dumps({"step": 1, "next": "last words"}).encode())
        time.sleep(hold)
        write(path, json.dumps({"step": 2, "next": "done", "final": True}).encode())
        return 0
    good = json.dumps(GOOD).encode()
    write(path, good)
    time.sleep(hold)
    if mode == "bad-symlink":
        link(path, os.environ["AGENT_OUTSIDE_FILE"])
    else:
        bad = bad_version(mode, good)
        if bad is None:
            print(f"unknown AGENT_MODE {mode!r}", file=sys.stderr)
            return 2
        write(path, bad)
    time.sleep(hold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
