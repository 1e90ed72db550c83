"""A scripted agent for overnight's hostile-input tests. Standard library only.

`AGENT_MODE` says what it does; every mode writes its checkpoint atomically, as the agent
contract asks, to `$OVERNIGHT_CHECKPOINT`:

- `bad-binary`, `bad-truncated`, `bad-huge`, `bad-symlink`, `bad-fifo`, `bad-folder`,
  `bad-deep`: write a good checkpoint, wait, replace it with a bad one (not UTF-8 / cut-off
  JSON / 10 MB / a symlink to `$AGENT_OUTSIDE_FILE` outside the sandbox / a FIFO / a folder /
  200 KB of `[` then `]`), wait, and exit 0.
- `secret-in-checkpoint`: write the value of the secret variable named by `AGENT_SECRET_NAME`
  into its checkpoint (its next step and a note, as a careless agent does), and exit 0.
- `secret-proof`: write a checkpoint holding the sha256 of the secret variable named by
  `AGENT_SECRET_NAME` (never the value), and exit 0.
- `last-words`: write a first checkpoint, wait, write a final one, and exit 0.
- `loud-crash`: print a few lines of work, one holding the secret named by `AGENT_SECRET_NAME`
  (as careless agents do), and crash (exit 3) in attempt 1 after a checkpoint; later attempts
  print a line, hold (`AGENT_LATER_HOLD` seconds, default `AGENT_HOLD`), and finish (handing
  over `AGENT_FINISH_SUMMARY` and the JSON object `AGENT_FINISH_OUTPUTS` the way the kit's
  `finish()` does, when set). For the tests of what overnight keeps of an agent's output.
  With `AGENT_HOLD_UNTIL` (a path), attempt N holds instead until `<path>-N` exists (a test
  lets it go once it saw what it waits for; `HOLD_UNTIL_CAP` seconds at most).
- `done-check`: one start of an agent whose work a done check judges: it notes the start's
  restart reason and what the kit's `done_check_failure()` says (the failed check, from
  `/workspace/.overnight/done-check.txt`) in its checkpoint, writes `fixed.txt` in its `cwd`
  on its `AGENT_FIX_ON_START`-th start (default 2; 0: never), and exits 0. Each start also
  writes `work-<start>.txt` in its `cwd` (never committed) after noting (`found`) the
  `work-*.txt` it found there; on its `AGENT_CRASH_ON_START`-th start (default 0: never) it
  crashes (exit 3) after its checkpoint.
- `escape`: try to write each host path in `AGENT_ESCAPE_PATHS` (`:`-separated), write a
  checkpoint saying how each try went, and exit 0.
- `steps`: three steps, a checkpoint after each, resumed from the checkpoint; crashes once per
  run after step `AGENT_DIE_AFTER` (remembered by the outside world at
  `OVERNIGHT_LEDGER_URL`). With `AGENT_HARDCODED=1` the checkpoint path is written in the
  code, `/workspace/checkpoint.json`, as agents made for Runtime sandboxes often do.

`AGENT_HOLD` (seconds, default 3) is how long each checkpoint stays before the next move.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

GOOD = {"step": 1, "done": ["good step"], "next": "the bad write", "notes": ["good checkpoint"]}
HUGE_BYTES = 10 * 1024 * 1024
# The longest an `AGENT_HOLD_UNTIL` hold lasts when nobody lets it go (a test that failed).
HOLD_UNTIL_CAP = 600.0


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
    if mode == "bad-deep":
        return b"[" * 100_000 + b"]" * 100_000
    return None


def not_a_file(path: Path, mode: str) -> None:
    """Put a FIFO or a folder where the checkpoint is."""
    tmp = path.parent / f".cp-odd-{os.getpid()}"
    if mode == "bad-fifo":
        os.mkfifo(tmp)
        os.replace(tmp, path)
    else:
        tmp.mkdir()
        path.unlink()
        os.rename(tmp, path)


def try_to_write(target: str) -> str:
    try:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text("escaped\n")
    except OSError as error:
        return f"refused: {os.strerror(error.errno or 0)}"
    return "written"


def first_time(switch: str) -> bool:
    """Asks the outside world whether this run reaches `switch` for the first time."""
    body = {"run_id": os.environ["OVERNIGHT_RUN_ID"], "switch": switch}
    request = urllib.request.Request(
        os.environ["OVERNIGHT_LEDGER_URL"].rstrip("/") + "/once",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        return bool(json.loads(answer.read())["first"])


def steps(path: Path, hold: float) -> int:
    checkpoint = json.loads(path.read_text()) if path.exists() else {"step": 0, "notes": []}
    notes: list[str] = checkpoint["notes"]
    die_after = int(os.environ.get("AGENT_DIE_AFTER", "0"))
    for n in range(int(checkpoint["step"]) + 1, 4):
        time.sleep(hold)
        if n == die_after and first_time(f"died-after-{n}"):
            print(f"dying after step {n}, before its checkpoint", flush=True)
            return 3
        notes.append(f"step {n} in attempt {os.environ['OVERNIGHT_ATTEMPT']}")
        next_step = f"step {n + 1}" if n < 3 else "done"
        write(path, json.dumps({"step": n, "next": next_step, "notes": notes}).encode())
    return 0


def hold_for(seconds: float, attempt: str) -> None:
    """Hold `seconds`, or with `AGENT_HOLD_UNTIL` until the test lets this attempt go."""
    until = os.environ.get("AGENT_HOLD_UNTIL")
    if not until:
        time.sleep(seconds)
        return
    released = Path(f"{until}-{attempt}")
    give_up = time.monotonic() + HOLD_UNTIL_CAP
    while not released.exists() and time.monotonic() < give_up:
        time.sleep(0.1)


def loud_crash(path: Path) -> int:
    attempt = os.environ["OVERNIGHT_ATTEMPT"]
    hold = float(os.environ.get("AGENT_HOLD", "0.5"))
    if attempt != "1":
        print(f"attempt {attempt}: picking up from the checkpoint", flush=True)
        hold_for(float(os.environ.get("AGENT_LATER_HOLD", hold)), attempt)
        final: dict[str, object] = {"step": 2, "next": "done", "notes": ["recovered"]}
        if "AGENT_FINISH_SUMMARY" in os.environ:  # the kit's finish(), as plain file protocol
            handed = {
                "summary": os.environ["AGENT_FINISH_SUMMARY"],
                "outputs": json.loads(os.environ.get("AGENT_FINISH_OUTPUTS", "{}")),
            }
            final["overnight"] = {"finish": handed}
        write(path, json.dumps(final).encode())
        print("all done", flush=True)
        return 0
    write(path, json.dumps({"step": 1, "next": "call the API", "notes": ["step 1"]}).encode())
    for n in range(1, 6):
        print(f"working: line {n} of the first attempt", flush=True)
    secret = os.environ.get(os.environ.get("AGENT_SECRET_NAME", ""), "")
    print(f"calling the API with token={secret}", flush=True)
    print("Traceback (most recent call last):", file=sys.stderr, flush=True)
    print(f"RuntimeError: the API refused token {secret}", file=sys.stderr, flush=True)
    hold_for(hold, attempt)
    return 3


def done_check(path: Path) -> int:
    import overnight_agent as kit  # on every sandbox's PYTHONPATH

    checkpoint = json.loads(path.read_text()) if path.exists() else {"starts": 0, "notes": []}
    checkpoint["starts"] += 1
    starts = checkpoint["starts"]
    failure = kit.done_check_failure()
    checkpoint["notes"].append(f"start {starts}: {kit.restart_reason() or 'first start'}")
    checkpoint["told"] = failure
    found = checkpoint.setdefault("found", {})
    found[str(starts)] = sorted(p.name for p in Path.cwd().glob("work-*.txt"))
    Path(f"work-{starts}.txt").write_text(f"start {starts}\n")
    fix_on = int(os.environ.get("AGENT_FIX_ON_START", "2"))
    if fix_on and starts >= fix_on:
        Path("fixed.txt").write_text(f"fixed on start {starts}\n")
        checkpoint["next"] = "done: fixed"
    else:
        checkpoint["next"] = "done (not fixed)"
    write(path, json.dumps(checkpoint).encode())
    if starts == int(os.environ.get("AGENT_CRASH_ON_START", "0")):
        print(f"start {starts} crashed", flush=True)
        return 3
    print(f"start {starts} done", flush=True)
    return 0


def main() -> int:
    mode = os.environ["AGENT_MODE"]
    hold = float(os.environ.get("AGENT_HOLD", "3"))
    if mode == "steps":
        hard_coded = os.environ.get("AGENT_HARDCODED") == "1"
        return steps(
            Path(
                "/workspace/checkpoint.json" if hard_coded else os.environ["OVERNIGHT_CHECKPOINT"]
            ),
            hold,
        )
    path = Path(os.environ["OVERNIGHT_CHECKPOINT"])
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "secret-proof":
        value = os.environ.get(os.environ["AGENT_SECRET_NAME"], "")
        proof = {"step": 1, "done": ["proof"], "next": "done", "secret_sha256": ""}
        proof["secret_sha256"] = hashlib.sha256(value.encode()).hexdigest() if value else ""
        write(path, json.dumps(proof).encode())
        print(f"secret present: {bool(value)}", flush=True)
        return 0
    if mode == "secret-in-checkpoint":
        value = os.environ.get(os.environ["AGENT_SECRET_NAME"], "")
        leak = {"step": 1, "next": f"push with {value}", "notes": [f"token {value}"]}
        write(path, json.dumps(leak).encode())
        return 0
    if mode == "escape":
        tries = {t: try_to_write(t) for t in os.environ["AGENT_ESCAPE_PATHS"].split(":")}
        write(path, json.dumps({"step": 1, "next": "done", "tries": tries}).encode())
        return 0
    if mode == "loud-crash":
        return loud_crash(path)
    if mode == "done-check":
        return done_check(path)
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
    elif mode in ("bad-fifo", "bad-folder"):
        not_a_file(path, mode)
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
