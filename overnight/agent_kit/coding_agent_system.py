"""What the coding-agent adapter (`coding_agent.py`) does with the system: its child's output
lines, bounded; the processes a dead CLI leaves; git; files written whole; the session store.

Standard library only, Python 3.8 or newer, like the kit.

- **Lines** (`LineReader`): a thread reads the CLI's stdout in chunks and hands over one JSON
  line at a time; a line longer than its bound is dropped (counted) while it is read, so a
  hostile or broken line never holds more than the bound in memory.
- **Leftovers** (`become_subreaper`, `end_cli`): a killed Claude Code leaves its tool's shell
  running (the tool runs in a session of its own, so the CLI's process group does not reach
  it). The adapter is the child subreaper of its subtree (`PR_SET_CHILD_SUBREAPER`): what a
  dead CLI leaves is re-parented to the adapter, not to the sandbox's init, so every leftover
  is found among the adapter's descendants in `/proc`, and ended. Only what began after the
  adapter's first CLI is taken, and the CLI's zombie is held until its leftovers are ended (its
  pid, group and session ids then name it alone, never a later process given the same
  number): a process that is not the root the adapter assumes (its code run inside another
  program) leaves that program's earlier children, and their exit statuses, alone.
- **git** (`Git`, `Pusher`): a commit of the workspace's changes per step, and pushes of HEAD
  to the run's branch on origin in a thread of their own (a slow or failing push never holds
  up a checkpoint; failures are said and retried with the next step).
- **Session store** (`SessionStore`): copies of the CLI's session files kept outside the
  sandbox (a folder the worker gives), appended as the files grow, so a fresh sandbox resumes
  the same session.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit import overnight_agent as kit
else:  # in the sandbox: a sibling module
    import overnight_agent as kit

PR_SET_CHILD_SUBREAPER = 36
# A line of the CLI's JSON output longer than this is dropped (Claude Code's stream-json
# repeats tool results, so a few MiB is an honest line; more is not read into memory).
MAX_LINE_BYTES = 8 * 1024 * 1024
READ_CHUNK = 65536


# --- lines ---------------------------------------------------------------------------------


class LineReader(threading.Thread):
    """Read `stream` to its end, putting `(tag, value)` on `out`: `("line", dict)` for each JSON
    object line, `("eof", None)` at the end. Lines that are not JSON objects are skipped;
    lines over `max_bytes` are dropped while read (`dropped` counts them)."""

    def __init__(
        self,
        stream: IO[bytes],
        out: queue.Queue[tuple[Any, ...]],
        tag: str = "line",
        max_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        super().__init__(name=f"reader-{tag}", daemon=True)
        self.stream = stream
        self.out = out
        self.tag = tag
        self.max_bytes = max_bytes
        self.dropped = 0

    def run(self) -> None:
        fd = self.stream.fileno()
        pending = bytearray()
        skipping = False  # inside a line over the bound: drop until its newline
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                break
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    if not skipping:
                        pending += chunk[start:]
                        if len(pending) > self.max_bytes:
                            pending.clear()
                            skipping = True
                            self.dropped += 1
                    break
                if skipping:
                    skipping = False
                else:
                    pending += chunk[start:end]
                    if len(pending) > self.max_bytes:
                        self.dropped += 1
                    else:
                        self._hand_over(bytes(pending))
                    pending.clear()
                start = end + 1
        if pending and not skipping and len(pending) <= self.max_bytes:
            self._hand_over(bytes(pending))
        _close(self.stream)
        self.out.put(("eof", self.tag))

    def _hand_over(self, raw: bytes) -> None:
        try:
            value = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            return
        if isinstance(value, dict):
            self.out.put((self.tag, value))


class TailReader(threading.Thread):
    """Copy `stream` (the CLI's stderr) to `sink` line by line (each clipped), keeping the last
    `keep` bytes for the adapter's notes."""

    def __init__(self, stream: IO[bytes], sink: IO[str], keep: int = 4000) -> None:
        super().__init__(name="reader-stderr", daemon=True)
        self.stream = stream
        self.sink = sink
        self.keep = keep
        self._tail = bytearray()
        self._lock = threading.Lock()

    def run(self) -> None:
        fd = self.stream.fileno()
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                _close(self.stream)
                return
            with self._lock:
                self._tail += chunk
                del self._tail[: max(0, len(self._tail) - self.keep)]
            try:
                self.sink.write(chunk.decode("utf-8", "replace"))
                self.sink.flush()
            except (OSError, ValueError):
                pass

    def tail(self) -> str:
        with self._lock:
            return self._tail.decode("utf-8", "replace")


def _close(stream: IO[bytes]) -> None:
    try:
        stream.close()
    except OSError:
        pass


# --- processes -----------------------------------------------------------------------------


def become_subreaper() -> bool:
    """Make this process the child subreaper of its subtree (Linux); True when it is."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of `pid` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def started(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, from /proc), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _started_since(pid: int, since: int | None) -> bool:
    begun = started(pid)
    return since is not None and begun is not None and begun >= since


# When this process's first CLI started: what began since among its descendants is its CLIs'
# (a leftover that forked while an earlier CLI's were ended is found at the next CLI's end).
_first_cli_began: list[int] = []


def exited(pid: int) -> bool:
    """Whether this process's child `pid` has ended, without reaping it: its zombie keeps its
    pid, group and session ids from being given to a later process."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def end_cli(
    process: subprocess.Popen[bytes], keep: Callable[[], set[int]], timeout: float | None = None
) -> list[str]:
    """After the CLI's end (waited for up to `timeout` s, never reaped): end what it left (its
    group and session, and this process's descendants begun since it started, except `keep()`:
    the adapter's own git), its group; say what was ended. The caller then reaps the CLI
    (`process.wait()`)."""
    if timeout is None:
        try:
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
    else:
        deadline = time.monotonic() + timeout
        while not exited(process.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
    begun = started(process.pid)
    if begun is not None and not _first_cli_began:
        _first_cli_began.append(begun)
    since = _first_cli_began[0] if _first_cli_began else None
    running = keep()
    ended = end_processes(
        leftovers(process.pid, running, since), running | {process.pid}, since=since
    )
    if begun is not None:  # still its number: its zombie is held, or it runs
        kill_group(process.pid)
    return ended


def descendants(root: int) -> list[int]:
    """Every live process under `root` (not itself), parents before children."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[1], []).append(pid)
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(0), []):
            found.append(child)
            pending.append(child)
    return found


def leftovers(cli_pid: int, keep: set[int], since: int | None = None) -> list[int]:
    """The processes a CLI left: this process's descendants begun since `since` (default: the
    CLI's start; re-parented here, the subreaper) and the members of the CLI's process group
    and session, except `keep` and what is under them (the adapter's own git commands).
    Nothing once `cli_pid` is gone (reaped): its number may be another's by then."""
    me = os.getpid()
    begun = started(cli_pid)
    if begun is None:
        return []
    since = begun if since is None else since
    kept: set[int] = set()
    for pid in keep:
        kept.add(pid)
        kept.update(descendants(pid))
    found = [pid for pid in descendants(me) if pid not in kept and _started_since(pid, since)]
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is None or pid in kept or pid == me or pid in found:
            continue
        if stat[2] == cli_pid or stat[3] == cli_pid:
            found.append(pid)
    return [pid for pid in found if _alive(pid)]


def end_processes(
    pids: list[int], keep: set[int], grace: float = 0.0, since: int | None = None
) -> list[str]:
    """SIGKILL `pids` (SIGTERM first when `grace` > 0), reap the zombies among this process's
    children begun since `since` (never one in `keep`: a child a Popen waits for), and say
    what was ended ("sleep (pid 41)")."""
    named = [(pid, process_name(pid)) for pid in pids]
    if grace > 0:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.02)
    _signal_all(pids, signal.SIGKILL)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.01)
    reap_children(keep, since)
    return [f"{name or '?'} (pid {pid})" for pid, name in named]


def _signal_all(pids: list[int], number: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def reap_children(keep: set[int], since: int | None = None) -> None:
    """Reap the zombies among this process's children that no Popen waits for (`keep`): the
    orphans re-parented here that ended. With `since`, only those begun since then (a CLI's
    start): a child the process had before is its owner's to wait for."""
    me = os.getpid()
    for pid in _all_pids():
        if pid in keep or (since is not None and not _started_since(pid, since)):
            continue
        stat = _stat(pid)
        if stat is not None and stat[1] == me and stat[0] == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def kill_group(pgid: int, number: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, number)
    except (ProcessLookupError, PermissionError):
        pass


# --- files ---------------------------------------------------------------------------------


def write_whole(path: str, text: str) -> None:
    """Replace `path` with `text` whole or not at all: the kit's own atomic write (temp file,
    fsync, rename, the folder fsynced), with the temporary names the session copy skips."""
    kit._write_whole(path, text, prefix=".tmp-")


def read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as source:
            value = json.load(source)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


class JsonLines:
    """Read a file that grows by whole JSON lines (a CLI's session file) from where the last
    read stopped: `new()` yields the objects of the lines completed since, read a chunk at a
    time (a line over MAX_LINE_BYTES is skipped). With `needles`, only lines holding one of
    them are parsed (a session file is mostly tool output the adapter has no use for)."""

    CHUNK = 4 * 1024 * 1024

    def __init__(self, path: str, offset: int = 0, needles: tuple[bytes, ...] = ()) -> None:
        self.path = path
        self.offset = offset
        self.needles = needles
        self._partial = b""
        self._skipping = False  # inside a line over the bound

    def new(self) -> Iterator[dict[str, Any]]:
        try:
            source = open(self.path, "rb")
        except OSError:
            return
        with source:
            source.seek(self.offset)
            while True:
                chunk = source.read(self.CHUNK)
                if not chunk:
                    return
                self.offset += len(chunk)
                lines = chunk.split(b"\n")
                lines[0] = self._partial + lines[0]
                self._partial = lines.pop()
                if self._skipping and lines:
                    lines.pop(0)  # the end of the line over the bound
                    self._skipping = False
                if len(self._partial) > MAX_LINE_BYTES:
                    self._partial = b""
                    self._skipping = True
                for line in lines:
                    value = self._parse(line)
                    if value is not None:
                        yield value

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        if len(line) > MAX_LINE_BYTES:
            return None
        if self.needles and not any(needle in line for needle in self.needles):
            return None
        try:
            value = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


# --- git -----------------------------------------------------------------------------------

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


# --- the session store ---------------------------------------------------------------------


class SessionStore:
    """Copies of a CLI's session files in `folder` (outside the sandbox), at the same path
    relative to the CLI's home (`~/.claude` or `$CODEX_HOME`) as in it. A file is appended to
    its copy as it grows (session files only grow: JSON lines added at the end); one that did
    not grow from its copy is copied whole."""

    def __init__(self, folder: str, home: str) -> None:
        self.folder = folder
        self.home = home

    def _copy_path(self, relative: str) -> str:
        return os.path.join(self.folder, relative)

    def save(self, path: str) -> str:
        """Bring the copy of `path` up to date; "" when it is, else why not."""
        relative = os.path.relpath(path, self.home)
        if relative.startswith(".."):
            return f"{path} is not under {self.home}"
        copy = self._copy_path(relative)
        try:
            size = os.path.getsize(path)
            kept = os.path.getsize(copy) if os.path.exists(copy) else 0
            if 0 < kept <= size and _same_bytes(path, copy, kept):
                if kept < size:
                    with open(path, "rb") as source, open(copy, "ab") as out:
                        source.seek(kept)
                        _copy_stream(source, out, size - kept)
                        out.flush()
                        os.fsync(out.fileno())
                return ""
            os.makedirs(os.path.dirname(copy), exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(copy))
            with open(path, "rb") as source, os.fdopen(fd, "wb") as out:
                _copy_stream(source, out, size)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, copy)
            return ""
        except OSError as error:
            return f"could not copy {path} to the session store: {error}"

    def find(self, pattern: Callable[[str], bool]) -> list[str]:
        """The relative paths of the copies whose relative path `pattern` accepts."""
        found = []
        for folder, _, names in os.walk(self.folder):
            for name in names:
                relative = os.path.relpath(os.path.join(folder, name), self.folder)
                if not name.startswith(".tmp-") and pattern(relative):
                    found.append(relative)
        return sorted(found)

    def restore(self, relative: str, target_relative: str = "") -> str:
        """Put the copy of `relative` back into the CLI's home (at `target_relative`, default
        the same) unless a file at least as long is there; "" when done (or not needed), else
        why not."""
        copy = self._copy_path(relative)
        target = os.path.join(self.home, target_relative or relative)
        try:
            if os.path.exists(target) and os.path.getsize(target) >= os.path.getsize(copy):
                return ""
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(target))
            with open(copy, "rb") as source, os.fdopen(fd, "wb") as out:
                _copy_stream(source, out, os.path.getsize(copy))
            os.replace(temp, target)
            return ""
        except OSError as error:
            return f"could not restore {relative} from the session store: {error}"


def _copy_stream(source: IO[bytes], out: IO[bytes], size: int) -> None:
    left = size
    while left > 0:
        chunk = source.read(min(left, 1 << 20))
        if not chunk:
            return
        out.write(chunk)
        left -= len(chunk)


def _same_bytes(first: str, second: str, size: int) -> bool:
    """Whether the first `size` bytes of both files are the same (the last 64 KiB compared,
    and the first: enough for files that only grow)."""
    window = min(size, 65536)
    with open(first, "rb") as a, open(second, "rb") as b:
        if a.read(window) != b.read(window):
            return False
        a.seek(size - window)
        b.seek(size - window)
        return a.read(window) == b.read(window)


def file_digest(path: str) -> tuple[int, str]:
    """(size, sha256 hex) of `path`; (0, "") when it cannot be read."""
    digest = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as source:
            while True:
                chunk = source.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                size += len(chunk)
    except OSError:
        return 0, ""
    return size, digest.hexdigest()


class GrowingDigest:
    """The sha256 of a file that only grows, kept up to date by hashing what was added since
    the last look (the whole file again when it did not grow from what was hashed)."""

    def __init__(self) -> None:
        self.path = ""
        self.size = 0
        self._hash = hashlib.sha256()
        self._tail = b""  # the last bytes hashed, to see that the file still starts the same

    def update(self, path: str) -> tuple[int, str]:
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as source:
                if path != self.path or size < self.size or not self._same_tail(source):
                    self.path, self.size, self._hash, self._tail = path, 0, hashlib.sha256(), b""
                source.seek(self.size)
                while self.size < size:
                    chunk = source.read(min(1 << 20, size - self.size))
                    if not chunk:
                        break
                    self._hash.update(chunk)
                    self.size += len(chunk)
                    self._tail = (self._tail + chunk)[-4096:]
        except OSError:
            return self.size, self._hash.hexdigest() if self.size else ""
        return self.size, self._hash.hexdigest()

    def _same_tail(self, source: IO[bytes]) -> bool:
        if not self._tail:
            return True
        source.seek(self.size - len(self._tail))
        return source.read(len(self._tail)) == self._tail
