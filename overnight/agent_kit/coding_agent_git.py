"""The workspace's git for the coding-agent adapter (`coding_agent.py`): a commit of the
workspace's changes per step, and pushes of HEAD to the run's branch on origin in a thread of
their own (a slow or failing push never holds up a checkpoint; failures are said and retried
with the next step). Standard library only, Python 3.8 or newer, like the kit.

The adapter's git commands are known while they run (`Git.running`): the CLI's leftovers are
ended after each CLI, and the adapter's own git is never taken for one.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "overnight coding agent",
    "GIT_AUTHOR_EMAIL": "coding-agent@overnight.invalid",
    "GIT_COMMITTER_NAME": "overnight coding agent",
    "GIT_COMMITTER_EMAIL": "coding-agent@overnight.invalid",
}


class Git:
    """The workspace's repository: commits of each step's changes, HEAD, the branch's log."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._lock = threading.Lock()
        self._running: set[int] = set()  # git processes not yet waited for
        self.env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
        self.is_repo = self.run("rev-parse", "--git-dir")[0] == 0
        if self.is_repo and not self.run("config", "user.email")[1].strip():
            self.env.update(GIT_IDENTITY)

    def run(self, *args: str, timeout: float = 120) -> tuple[int, str, str]:
        try:
            process = subprocess.Popen(
                ["git", *args],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as error:
            return 127, "", str(error)
        with self._lock:
            self._running.add(process.pid)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            return 124, "", f"git {args[0]} took over {timeout:.0f} s"
        finally:
            with self._lock:
                self._running.discard(process.pid)
        return (
            process.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
        )

    def running(self) -> set[int]:
        """The git processes of the adapter's own now (not a CLI's leftovers)."""
        with self._lock:
            return set(self._running)

    def commit_all(self, message: str) -> tuple[bool, str]:
        """Commit every change in the workspace (`git add -A`) with `message`; (committed,
        why not) — nothing changed is (False, "")."""
        if not self.is_repo:
            return False, "not a git repository"
        code, _, err = self.run("add", "-A")
        if code != 0:
            return False, f"git add failed: {err.strip()[:200]}"
        if self.run("diff", "--cached", "--quiet")[0] == 0:
            return False, ""
        code, _, err = self.run("commit", "-q", "--no-verify", "-m", message)
        if code != 0:
            return False, f"git commit failed: {err.strip()[:200]}"
        return True, ""

    def head(self) -> str:
        code, out, _ = self.run("rev-parse", "HEAD")
        return out.strip() if code == 0 else ""

    def log_oneline(self, most: int = 30) -> str:
        code, out, _ = self.run("log", "--oneline", f"-{most}")
        return out.strip() if code == 0 else ""

    def has_origin(self) -> bool:
        return self.is_repo and self.run("remote", "get-url", "origin")[0] == 0


class Pusher(threading.Thread):
    """Pushes HEAD to `branch` on origin whenever asked (`want()`), in its own thread; the
    latest wish wins. `last` is the outcome of the last push ("" when it worked)."""

    def __init__(self, git: Git, branch: str, say: Callable[[str], None]) -> None:
        super().__init__(name="pusher", daemon=True)
        self.git = git
        self.branch = branch
        self.say = say
        self._wanted = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._lock = threading.Lock()
        self.pushed = ""  # the last commit pushed
        self.last_error = ""
        self.failures = 0

    def want(self) -> None:
        with self._lock:
            self._idle.clear()
            self._wanted.set()

    def flush(self, timeout: float) -> bool:
        """Wait until no push is wanted or running (at most `timeout` s); True when idle."""
        return self._idle.wait(timeout)

    def run(self) -> None:
        while True:
            self._wanted.wait()
            with self._lock:
                self._wanted.clear()
            head = self.git.head()
            if head and head != self.pushed:
                code, _, err = self.git.run(
                    "push", "-q", "origin", f"HEAD:refs/heads/{self.branch}", timeout=300
                )
                if code == 0:
                    self.pushed = head
                    self.last_error = ""
                    self.failures = 0
                else:
                    self.failures += 1
                    self.last_error = (err.strip().splitlines() or ["?"])[-1][:200]
                    self.say(f"push to origin {self.branch} failed: {self.last_error}")
            with self._lock:
                if not self._wanted.is_set():
                    self._idle.set()
