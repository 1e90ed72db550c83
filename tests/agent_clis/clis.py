"""Driving the real CLIs headless against the fake model API, in a `Sandbox`.

`Driver` knows one CLI's command line (first run and resume), its settings, where it keeps its
session, and how its output says it finished: each kind's subclass is in its module of
tests/kinds/ (its `KindFacts.driver`). `Running` is one process of it: its output lines, its
pid (inside bubblewrap: the CLI's own, found among bwrap's descendants), a SIGKILL of the CLI
alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakes.model_api import FakeModelApi
from tests.agent_clis.sandbox import Sandbox
from tests.waits import CAP

FAKE_KEY = "sk-fake-model-api"


class Driver:
    """One CLI kind's way of being run (its subclass: tests/kinds/<kind>.py)."""

    binary_name = ""
    # Its exit code when its usage limit is met.
    usage_limit_exit = 1

    def __init__(self, sandbox: Sandbox, fake: FakeModelApi, *, subscription: bool = False) -> None:
        self.sandbox = sandbox
        self.fake = fake
        self.subscription = subscription  # Claude Code: an OAuth token instead of an API key

    def first(self, prompt: str) -> list[str]:
        raise NotImplementedError

    def resume(self, session_id: str, prompt: str) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def session_files(self) -> list[Path]:
        raise NotImplementedError

    def session_mentions(self, text: str) -> bool:
        """Whether the CLI's session file (as written so far) holds `text`."""
        for path in self.session_files():
            try:
                if text in path.read_text(encoding="utf-8", errors="replace"):
                    return True
            except OSError:
                continue
        return False

    def finished(self, lines: list[dict[str, Any]]) -> tuple[str, str]:
        """The session id and final text its output ends with (AssertionError if none)."""
        raise NotImplementedError

    def usage_limit_reported(self, finished: Finished, resets_at: int) -> None:
        """That its output (or session) says it met a usage limit resetting at `resets_at`
        (AssertionError if not)."""
        raise NotImplementedError

    def start(self, argv: list[str]) -> Running:
        command, env = self.sandbox.command(argv, self.env())
        return Running(self, command, env)


@dataclass
class Finished:
    returncode: int
    lines: list[dict[str, Any]]
    stderr: str

    def describe(self) -> str:
        return f"exit {self.returncode}; last lines {self.lines[-3:]}; stderr {self.stderr[-800:]}"


class Running:
    def __init__(self, driver: Driver, command: list[str], env: dict[str, str]) -> None:
        self.driver = driver
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            command,
            cwd=driver.sandbox.work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.seen: dict[int, str] = {}  # every process of its tree seen: its start time

    def tree(self) -> list[int]:
        """The live processes under it (itself included); remembered for `clean_up`."""
        pids = live_tree(self.process)
        remember(self.seen, pids)
        return pids

    def cli_pid(self, timeout: float = CAP) -> int:
        """The CLI's own process: the topmost of its tree running the CLI's binary."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            name = self.driver.binary_name
            for pid in self.tree():
                if executable_name(pid) == name and executable_name(parent(pid)) != name:
                    return pid
            time.sleep(0.01)
        raise AssertionError(f"no {self.driver.binary_name} process under {self.process.pid}")

    def wait(self, timeout: float = 60) -> Finished:
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.clean_up()
            out, err = self.process.communicate()
            raise AssertionError(f"the CLI did not end in {timeout} s: {err[-800:]}") from None
        return Finished(self.process.returncode, json_lines(out), err)

    def clean_up(self) -> None:
        """Kill what is left of it: the CLI and any tool it left running."""
        self.tree()
        kill_seen(self.seen)


def json_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            lines.append(value)
    return lines


def live_tree(process: subprocess.Popen[str]) -> list[int]:
    """`process` and the processes under it; none once it is reaped (its pid, and so the tree
    under that pid, may be another's by then)."""
    if process.returncode is not None:
        return []
    return [process.pid, *descendants(process.pid)]


def start_time(pid: int) -> str:
    """When `pid` started (clock ticks since boot; "" when it is gone): with the pid, it names
    one process, never a later one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def remember(seen: dict[int, str], pids: list[int]) -> None:
    for pid in pids:
        began = start_time(pid)
        if began:
            seen[pid] = began


def kill_seen(seen: dict[int, str]) -> None:
    """SIGKILL each process of `seen` (pid -> start time) that is still the one seen. A pid
    whose process ended is left alone: by now it may name another test's process (pids are
    reused; this machine has 32768 of them)."""
    for pid, began in sorted(seen.items(), reverse=True):
        if start_time(pid) == began:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def executable_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""
