"""A sample agent for overnight: five steps, a checkpoint after each, idempotent outside actions.

It stands in for an AI coding agent, written on overnight's agent kit (`overnight_agent`, on
the agent's `PYTHONPATH` in every sandbox; outside one, put `overnight/agent_kit` there):

- `Checkpoint.load()` / `save()`: the checkpoint is read from `--resume PATH` (else
  `OVERNIGHT_CHECKPOINT`) and saved atomically to `OVERNIGHT_CHECKPOINT` after every step,
  with `step`, `next`, `notes`, `done` (the names of the steps done), `plan` and
  `done_actions`; a restart continues after the steps it lists as done;
- `action_key(n)`: its outside actions (opening the pull request, posting the summary) are
  keyed `{run_id}-step-{n}`, the same on every attempt, in a ledger outside the sandbox, which
  stands for the outside world: a service over the network (`OVERNIGHT_LEDGER_URL`, see
  overnight/demo/outside_world.py) or a JSONL file the sandbox may write (`OVERNIGHT_LEDGER`); an
  action whose key is there already is skipped;
- `fresh_context(summary)`: saves a summary note and asks for a fresh start (the run's
  fresh-context exit code, `OVERNIGHT_FRESH_CONTEXT_EXIT_CODE`);
- it commits its work on the current branch after every step (and pushes when there is an
  origin).

Failure switches, each firing once per run (remembered by the ledger, so the restart
succeeds): `--die-after N` crashes after doing step N's work but before its checkpoint (the
worst moment: the restart redoes step N), `--stall-at N` hangs before step N,
`--fresh-context-after N` exits with the fresh-context code after step N's checkpoint.
Each flag can also come from the environment (`AGENT_DIE_AFTER`, ...). Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from overnight_agent import Checkpoint, attempt, fresh_context, restart_reason, run_id

STEPS = [
    "read the code",
    "write the migration",
    "run the tests",
    "open the pull request",
    "post a summary",
]
CRASH_EXIT_CODE = 3
MIGRATION = "migrations/0001_add_due_date.sql"


# --- the ledger: the outside world -----------------------------------------------------------


@contextlib.contextmanager
def locked_ledger(ledger: Path) -> Iterator[Any]:
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def outside_action(ledger: Path, key: str, action: str, detail: str) -> bool:
    """Record `action` under `key` unless it is recorded already. True when done now."""
    with locked_ledger(ledger) as handle:
        handle.seek(0)
        for line in handle:
            with contextlib.suppress(ValueError):
                if json.loads(line).get("key") == key:
                    return False
        entry = {"key": key, "action": action, "detail": detail, "at": time.time()}
        handle.write(json.dumps(entry) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
        return True


def fire_once(ledger: Path, run: str, switch: str) -> bool:
    """True the first time a failure switch is reached in this run, False ever after."""
    marker = ledger.parent / f".{run}.{switch}"
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        with open(marker, "x", encoding="utf-8"):
            return True
    except FileExistsError:
        return False


def post_json(url: str, body: dict[str, str], tries: int = 6) -> dict[str, Any]:
    """POST to the outside world, again after a network error (each call is idempotent)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    data = json.dumps(body).encode()
    for n in range(tries):
        request = urllib.request.Request(
            url, data=data, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with opener.open(request, timeout=10) as answer:
                found: dict[str, Any] = json.loads(answer.read())
                return found
        except urllib.error.HTTPError:
            raise
        except OSError:
            if n == tries - 1:
                raise
            time.sleep(min(0.2 * 2**n, 3.0))
    raise AssertionError("unreachable")


class Ledger:
    """The outside world: a service at `url` when there is one, else the file `path`."""

    def __init__(self, url: str | None, path: Path) -> None:
        self.url = url.rstrip("/") if url else None
        self.path = path

    def act(self, key: str, action: str, detail: str) -> bool:
        if self.url:
            body = {"key": key, "action": action, "detail": detail}
            return bool(post_json(f"{self.url}/actions", body)["done"])
        return outside_action(self.path, key, action, detail)

    def once(self, run: str, switch: str) -> bool:
        if self.url:
            said = post_json(f"{self.url}/once", {"run_id": run, "switch": switch})
            return bool(said["first"])
        return fire_once(self.path, run, switch)


# --- git ----------------------------------------------------------------------------------------


def git(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "overnight sample agent",
        "GIT_AUTHOR_EMAIL": "agent@overnight.invalid",
        "GIT_COMMITTER_NAME": "overnight sample agent",
        "GIT_COMMITTER_EMAIL": "agent@overnight.invalid",
    }
    return subprocess.run(["git", *args], capture_output=True, text=True, env=env, check=False)


def commit_step(n: int, name: str) -> str:
    if git("rev-parse", "--git-dir").returncode != 0:
        return "not a git repository: nothing committed"
    git("add", "-A")
    done = git("commit", "--allow-empty", "-q", "-m", f"step {n}: {name}")
    if done.returncode != 0:
        return f"commit failed: {done.stderr.strip()[:200]}"
    if git("remote", "get-url", "origin").returncode == 0:
        # Push so a new sandbox cloned from origin starts from the work the checkpoint lists.
        branch = git("rev-parse", "--abbrev-ref", "HEAD").stdout.strip()
        git("push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    return "committed"


# --- the five steps ---------------------------------------------------------------------------


class Context:
    def __init__(self, checkpoint: Checkpoint, ledger: Ledger) -> None:
        self.checkpoint = checkpoint
        self.ledger = ledger

    def act(self, n: int, action: str, detail: str) -> bool:
        """Do step `n`'s outside action once per run: True when done now, False when its key
        (the same on every attempt) shows it done already, by this attempt or an earlier one."""
        key = self.checkpoint.action_key(n)
        if self.checkpoint.done(key):
            return False
        done_now = self.ledger.act(key, action, detail)
        self.checkpoint.mark_done(key)  # saved with the step's checkpoint
        return done_now


def read_the_code(ctx: Context, n: int) -> str:
    files = [p for p in Path.cwd().rglob("*.py") if ".git" not in p.parts]
    return f"read {len(files)} Python file(s)"


def write_the_migration(ctx: Context, n: int) -> str:
    path = Path(MIGRATION)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("ALTER TABLE tasks ADD COLUMN due_date TEXT;\n", encoding="utf-8")
    return f"wrote {MIGRATION}"


def run_the_tests(ctx: Context, n: int) -> str:
    if not Path("tests").is_dir():
        return "no tests to run"
    result = subprocess.run(
        [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return "tests passed" if result.returncode == 0 else f"tests failed ({result.returncode})"


def open_the_pull_request(ctx: Context, n: int) -> str:
    branch = git("rev-parse", "--abbrev-ref", "HEAD").stdout.strip() or "unknown"
    opened = ctx.act(n, "open_pull_request", f"branch {branch}")
    return "opened the pull request" if opened else "pull request already open: not reopened"


def post_a_summary(ctx: Context, n: int) -> str:
    notes = len(ctx.checkpoint.notes)
    posted = ctx.act(n, "post_summary", f"{notes} notes; migration added")
    return "posted the summary" if posted else "summary already posted: not reposted"


STEP_ACTIONS: list[Callable[[Context, int], str]] = [
    read_the_code,
    write_the_migration,
    run_the_tests,
    open_the_pull_request,
    post_a_summary,
]


# --- main -------------------------------------------------------------------------------------


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description="overnight's sample agent")
    parser.add_argument("--resume", type=Path, help="checkpoint to continue from")
    parser.add_argument("--die-after", type=int, default=_int_or_none(env("AGENT_DIE_AFTER")))
    parser.add_argument("--stall-at", type=int, default=_int_or_none(env("AGENT_STALL_AT")))
    parser.add_argument(
        "--fresh-context-after",
        type=int,
        default=_int_or_none(env("AGENT_FRESH_CONTEXT_AFTER")),
    )
    parser.add_argument(
        "--fresh-context-code",
        type=int,
        default=_int_or_none(env("AGENT_FRESH_CONTEXT_CODE")),
        help="override the run's fresh-context code (OVERNIGHT_FRESH_CONTEXT_EXIT_CODE)",
    )
    parser.add_argument(
        "--step-delay", type=float, default=float(env("AGENT_STEP_DELAY", "0") or 0)
    )
    return parser.parse_args(argv)


def load(args: argparse.Namespace) -> Checkpoint:
    """The checkpoint to continue from (`--resume`, else `OVERNIGHT_CHECKPOINT`), saved to
    `OVERNIGHT_CHECKPOINT` (else the `--resume` path, else ./checkpoint.json)."""
    target = os.environ.get("OVERNIGHT_CHECKPOINT") or str(args.resume or "checkpoint.json")
    checkpoint = Checkpoint.load(str(args.resume) if args.resume else target)
    checkpoint.path = target
    checkpoint.plan = list(STEPS)
    if checkpoint.step == 0:
        checkpoint.next = STEPS[0]
    return checkpoint


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.fresh_context_code is not None:
        os.environ["OVERNIGHT_FRESH_CONTEXT_EXIT_CODE"] = str(args.fresh_context_code)
    run = run_id()
    checkpoint = load(args)
    ledger = Ledger(
        os.environ.get("OVERNIGHT_LEDGER_URL"),
        Path(os.environ.get("OVERNIGHT_LEDGER") or Path(checkpoint.path).parent / "ledger.jsonl"),
    )
    if restart_reason():
        checkpoint.note(
            f"attempt {attempt()} resumed at step {checkpoint.step + 1}: {restart_reason()}"
        )
    ctx = Context(checkpoint, ledger)
    print(f"attempt {attempt()}: resuming after step {checkpoint.step}", flush=True)

    for n in range(checkpoint.step + 1, len(STEPS) + 1):
        name = STEPS[n - 1]
        if args.stall_at == n and ledger.once(run, f"stalled-at-{n}"):
            print(f"stalling at step {n} ({name})", flush=True)
            while True:
                time.sleep(3600)
        if args.step_delay > 0:
            time.sleep(args.step_delay)
        outcome = STEP_ACTIONS[n - 1](ctx, n)
        committed = commit_step(n, name)
        print(f"step {n} ({name}): {outcome}; {committed}", flush=True)
        if args.die_after == n and ledger.once(run, f"died-after-{n}"):
            print(f"dying after step {n}, before its checkpoint", file=sys.stderr, flush=True)
            return CRASH_EXIT_CODE
        checkpoint.note(f"step {n}: {outcome}")
        checkpoint.step = n
        checkpoint.data["done"] = STEPS[:n]
        checkpoint.next = STEPS[n] if n < len(STEPS) else "done"
        checkpoint.save()
        if args.fresh_context_after == n and ledger.once(run, f"fresh-after-{n}"):
            print(f"context full after step {n}: asking for a fresh start", flush=True)
            fresh_context(f"context full after step {n}: {len(checkpoint.notes)} notes", checkpoint)
    print("all steps done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
