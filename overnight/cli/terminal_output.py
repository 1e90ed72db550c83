"""One rule for what the `overnight` command writes: nothing on its stdout or stderr can drive
the reader's terminal, whatever an agent wrote.

Most of what the commands print holds an agent's bytes: its output (`logs`), files and file
names (`inspect`), the diff of its workspace (`diff`), its checkpoint's notes, question,
choices, summary and outputs (`status`, `start --wait`, `answer`'s refusals), its last words,
git's messages about what it pushed. Escaping each at its place is a rule every new line of
code must remember; so besides those places, `guarded()` puts every write of a command through
`overnight.core.agent_text` (`terminal_safe`: every control character, bidirectional control and
zero-width character shown as its escape; newlines and tabs kept), on a terminal and in a
pipe alike: a pipe often ends on a terminal too (`| less -R`, `| tail`, a CI log viewer).

A `--json` document keeps its meaning: what it escapes becomes JSON's own `\\u001b` escape,
so the document parses to the same values.

`--raw` (of `diff`, `inspect`, `logs`) is for a program that wants the bytes as they are
(`git apply`, a file): it writes to the process's own stdout, past the rule, and refuses a
terminal (a person who means it can still pipe it through `cat`).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterator
from typing import BinaryIO, TextIO

from overnight.core.agent_text import terminal_json, terminal_safe
from overnight.core.errors import OvernightError

RAW_ON_A_TERMINAL = (
    "--raw writes the agent's bytes as they are, escape sequences and all, so not to a "
    "terminal: send them to a file or a program (> FILE, | git apply)"
)


class RawRefused(OvernightError):
    bad_input = True


class EscapingWriter(io.TextIOBase):
    """A text stream writing everything through `escape` to `inner`. A carriage return at
    the end of one write is held for the next: before a newline it ends a line and is kept,
    alone it would move the cursor and is escaped."""

    def __init__(self, inner: TextIO, escape: Callable[[str], str]) -> None:
        self.inner = inner
        self._escape = escape
        self._held = ""

    def write(self, text: str) -> int:
        whole = self._held + text
        self._held = "\r" if whole.endswith("\r") else ""
        if self._held:
            whole = whole[:-1]
        if whole:
            self.inner.write(self._escape(whole))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def finish(self) -> None:
        """Write what is held (a carriage return that no newline followed) and flush."""
        with contextlib.suppress(OSError, ValueError):  # a reader gone, a closed stream
            if self._held:
                self.inner.write(self._escape(self._held))
                self._held = ""
            self.inner.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8")


@contextlib.contextmanager
def guarded(*, json_out: bool = False) -> Iterator[None]:
    """For the block, `sys.stdout` and `sys.stderr` write through the rule: a JSON document's
    way (`terminal_json`) on stdout with `json_out`, else `terminal_safe`."""
    out, err = sys.stdout, sys.stderr
    writers = [
        EscapingWriter(out, terminal_json if json_out else terminal_safe),
        EscapingWriter(err, terminal_safe),
    ]
    sys.stdout, sys.stderr = writers
    try:
        yield
    finally:
        for writer in writers:
            writer.finish()
        sys.stdout, sys.stderr = out, err


def raw_stdout() -> BinaryIO:
    """The process's stdout as bytes, past the rule, for `--raw`; `RawRefused` when it is a
    terminal. What the rule holds back is written first, so the order is kept."""
    stream = sys.stdout
    if isinstance(stream, EscapingWriter):
        stream.flush()
        stream = stream.inner
    if stream.isatty():
        raise RawRefused(RAW_ON_A_TERMINAL)
    stream.flush()
    return stream.buffer


class RawText(io.TextIOBase):
    """`raw_stdout` as UTF-8 text (for text already decoded, like `logs` lines); closing it
    leaves stdout open."""

    def __init__(self, out: BinaryIO | None = None) -> None:
        self._out = raw_stdout() if out is None else out

    def write(self, text: str) -> int:
        self._out.write(text.encode("utf-8", errors="surrogateescape"))
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def writable(self) -> bool:
        return True


def shown(data: bytes) -> str:
    """Agent bytes as text for a person: UTF-8, a byte that is not shown as `\\xff`, and every
    control escaped (newlines and tabs kept)."""
    return terminal_safe(data.decode("utf-8", errors="backslashreplace"))
