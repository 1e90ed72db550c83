"""An agent whose state that matters is not in files it commits: its first step builds warm
state (a SQLite database filled for `AGENT_WARM_SECONDS`, and a helper process it starts),
then asks for a snapshot (`snapshot_here()`); every later step needs that state.

On a restart from the checkpoint the warm state is gone (a fresh clone) and is built again;
from a snapshot it is back (disk mode: the database file; the helper, which did not survive,
is started again in a moment). Each start records in the checkpoint when it was working again
(`ready_at`, by attempt) and how often the state was built (`builds`), for the tests and the
benchmark. It crashes once, in attempt 1 after step `AGENT_CRASH_AT`.

Environment: AGENT_WARM_SECONDS (default 3), AGENT_STEPS (default 6), AGENT_STEP_SECONDS
(default 0.5), AGENT_CRASH_AT (default 4; 0: never).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import overnight_agent as kit

WARM = "/workspace/warm"
DB = os.path.join(WARM, "cache.db")
HELPER_PID = os.path.join(WARM, "helper.pid")


def number(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def warm_db_ready() -> bool:
    try:
        with sqlite3.connect(DB) as db:
            return db.execute("select count(*) from cache").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def build_warm_db(seconds: float) -> None:
    os.makedirs(WARM, exist_ok=True)
    partial = DB + ".partial"
    if os.path.exists(partial):
        os.unlink(partial)
    with sqlite3.connect(partial) as db:
        db.execute("create table cache (k integer primary key, v text)")
        until = time.monotonic() + seconds
        k = 0
        while time.monotonic() < until:
            rows = [(k + i, f"value {k + i}") for i in range(200)]
            db.executemany("insert into cache values (?, ?)", rows)
            k += 200
            time.sleep(0.01)
    os.replace(partial, DB)


def helper_alive() -> bool:
    try:
        with open(HELPER_PID) as source:
            os.kill(int(source.read().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def start_helper() -> None:
    helper = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(HELPER_PID, "w") as out:
        out.write(str(helper.pid))


def main() -> int:
    cp = kit.Checkpoint.load()
    attempt = kit.attempt()
    steps = int(number("AGENT_STEPS", 6))
    crash_at = int(number("AGENT_CRASH_AT", 4))
    step_seconds = number("AGENT_STEP_SECONDS", 0.5)
    if not warm_db_ready():
        build_warm_db(number("AGENT_WARM_SECONDS", 3))
        cp.data["builds"] = int(cp.data.get("builds", 0)) + 1
    if not helper_alive():
        start_helper()
    cp.data.setdefault("ready_at", {})[str(attempt)] = time.time()
    cp.next = f"step {cp.step + 1}"
    cp.save()
    if cp.step == 0:
        cp.step = 1
        cp.note("warm state built")
        cp.save()
        kit.snapshot_here(cp, timeout=60)
    while cp.step < steps:
        if not warm_db_ready():
            print("warm state lost mid-run", file=sys.stderr)
            return 5
        time.sleep(step_seconds)
        cp.step += 1
        cp.next = f"step {cp.step + 1}" if cp.step < steps else "done"
        cp.note(f"step {cp.step} done in attempt {attempt}")
        cp.save()
        if attempt == 1 and cp.step == crash_at:
            print(f"crashing after step {cp.step}", file=sys.stderr)
            return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
