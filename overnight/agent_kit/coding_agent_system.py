"""What the coding-agent adapter (`coding_agent.py`) reads and writes: its child's output
lines, bounded; files written whole; the session store. Its siblings hold the rest of what it
does with the system: the processes a dead CLI leaves (`coding_agent_leftovers`) and git
(`coding_agent_git`).

Standard library only, Python 3.8 or newer, like the kit.

- **Lines** (`LineReader`, `JsonLines`): a thread reads the CLI's stdout in chunks and hands
  over one JSON line at a time, and a session file is read by the lines added since the last
  read; a line longer than its bound is dropped (counted) while it is read, so a hostile or
  broken line never holds more than the bound in memory.
- **Files** (`write_whole`, `read_json`): the kit's atomic write, and JSON read forgivingly.
- **Session store** (`SessionStore`): copies of the CLI's session files kept outside the
  sandbox (a folder the worker gives), appended as the files grow, so a fresh sandbox resumes
  the same session.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit import overnight_agent_files as kit_files
else:  # in the sandbox: a sibling module
    import overnight_agent_files as kit_files

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


# --- files ---------------------------------------------------------------------------------


def write_whole(path: str, text: str) -> None:
    """Replace `path` with `text` whole or not at all: the kit's own atomic write (temp file,
    fsync, rename, the folder fsynced), with the temporary names the session copy skips."""
    kit_files.write_whole(path, text, prefix=".tmp-")


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
