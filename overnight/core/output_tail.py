"""The last words of an agent: the tail of its output, cut small and with its secrets redacted.

Pure functions, used in the worker (the tail kept in a restart record, notifications) and by
the CLI (`overnight logs`). Redaction happens before anything is cut, on a window a little
larger than the tail, so a secret straddling the window's start can never survive as a piece.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from overnight.core.agent_text import markdown_inline as markdown_inline  # its home is agent_text
from overnight.core.secret_spellings import (
    literal_spellings,
    longest_spelling_chars,
    percent_pattern,
)

# What a restart record keeps of the ended attempt's output.
TAIL_LINES = 40
TAIL_BYTES = 4096
REDACTED = "***"
# Read this much more than the tail, so a secret cut by the window is still whole in it.
REDACTION_MARGIN_BYTES = 1024
# Text that may be cut right after its end (an output read while the agent writes, or cut
# short) ends in no beginning of a secret this long or longer: it is redacted too.
CUT_PREFIX_CHARS = 4
# The same for a beginning of a secret's other spelling (base64, hex:
# overnight.core.secret_spellings), longer, since hex and base64 text is made of few characters.
CUT_SPELLING_PREFIX_CHARS = 8


@dataclass(frozen=True)
class Tail:
    text: str
    # Earlier output was left out.
    truncated: bool


def secret_values(names: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """The values of the named variables in `environ` (the worker's, or the CLI's own), each
    non-empty one and each of its lines (a multi-line secret printed line by line)."""
    source = environ
    values: set[str] = set()
    for name in names:
        value = source.get(name)
        if not value:
            continue
        values.add(value)
        values.update(line for line in value.splitlines() if line.strip())
    return sorted(values, key=len, reverse=True)


def with_json_forms(secrets: Iterable[str]) -> list[str]:
    """Each secret, and each as it appears inside a JSON string (escaped quotes, backslashes,
    control and non-ASCII characters), for text that is JSON, such as a checkpoint."""
    forms: set[str] = set()
    for value in secrets:
        if value:
            forms.update(
                (value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1])
            )
    return sorted(forms, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str], *, start: int = 0, cut_end: bool = False) -> str:
    """`text[start:]` with every occurrence of each secret replaced by `***` (longest first),
    counting occurrences that begin before `start` too: a secret cut by the start is still
    replaced, never shown in part. Each secret is found as written and in its other spellings
    (base64, hex, percent-encoded: overnight.core.secret_spellings). `cut_end`: the text may have
    been cut right after its end, so a beginning of a secret there (`CUT_PREFIX_CHARS` or more,
    `CUT_SPELLING_PREFIX_CHARS` of a spelling) is replaced too."""
    values = _ordered(secrets)
    if not values:
        return text[start:]
    pattern = _pattern_in(text, values)
    out: list[str] = []
    pos = start
    for found in pattern.finditer(text) if pattern is not None else ():
        if found.end() <= pos:
            continue
        if found.start() > pos:
            out.append(text[pos : found.start()])
        out.append(REDACTED)
        pos = found.end()
    end = len(text)
    if cut_end:
        rest = text[pos:]
        cut = max(
            _cut_prefix(rest, list(values), CUT_PREFIX_CHARS),
            _cut_prefix(rest, _spellings(values)[1], CUT_SPELLING_PREFIX_CHARS),
        )
        end = max(pos, len(text) - cut)
    if end > pos:
        out.append(text[pos:end])
    if end < len(text):
        out.append(REDACTED)
    return "".join(out)


# The gateway's credentials by their shape (activities/gateway: tokens.py, git_http.py,
# service.py), for a reader that does not know a run's tokens (the CLI, the console run
# elsewhere than the worker): the token in a git URL's path (`/git/<sandbox>/<token>/...`, 32
# hex digits, fewer where the text was cut), a model token (`ovn-<sandbox>-<32 hex>`), and the
# password of any `user:password@` in a URL (the proxy's `sandbox-<name>:<token>@`).
_GIT_TOKEN = re.compile(r"(/git/[^/\s]+/)(?:[0-9a-f]{32}(?![0-9a-f])|[0-9a-f]{1,31}$)")
_MODEL_TOKEN = re.compile(r"\bovn-[A-Za-z0-9._-]+-[0-9a-f]{32}(?![0-9a-f])")
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^/\s@]+@")


def redact_credential_shapes(text: str) -> str:
    """`text` with every gateway credential found by its shape replaced by `***`."""
    text = _GIT_TOKEN.sub(rf"\g<1>{REDACTED}", text)
    text = _MODEL_TOKEN.sub(REDACTED, text)
    return _URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", text)


def holds_secret(text: str, secrets: Iterable[str]) -> bool:
    """Whether `text` holds any of `secrets`, as written or in another spelling."""
    values = _ordered(secrets)
    pattern = _pattern_in(text, values) if values else None
    return pattern is not None and pattern.search(text) is not None


def _ordered(secrets: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({s for s in secrets if s}, key=lambda s: (-len(s), s)))


def _pattern_in(text: str, values: tuple[str, ...]) -> re.Pattern[str] | None:
    """One expression for the spellings of `values` that may be in `text` (None: none may).
    Each spelling has a piece every match of it holds; one whose piece `text` lacks is left
    out, so text that holds no secret (nearly all of it) costs a few substring searches, not
    an expression of dozens of alternatives tried at each character."""
    present = tuple(source for piece, source in _spellings(values)[0] if piece in text)
    return _compiled(present) if present else None


# A percent-encoded spelling's piece is the secret's longest run of ASCII letters and digits
# (written as they are in every spelling), when it is at least this long; else it has none.
_PIECE_CHARS = 4
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")


@lru_cache(maxsize=64)
def _spellings(values: tuple[str, ...]) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """(a piece every match holds, the expression) of every spelling of every secret, the
    longest first (so a secret that begins with another is replaced whole); and the literal
    spellings, longest first (for a cut end)."""
    alternatives: dict[str, tuple[int, str]] = {}
    spellings: set[str] = set()
    for value in values:
        percent = percent_pattern(value)
        if percent is None:
            alternatives[re.escape(value)] = (len(value), value)
        else:
            # It matches the value as written too.
            runs = sorted(_ALNUM_RUN.findall(value), key=len, reverse=True)
            piece = runs[0] if runs and len(runs[0]) >= _PIECE_CHARS else ""
            alternatives[percent] = (len(value), piece)
        for spelled in literal_spellings(value):
            spellings.add(spelled)
            alternatives.setdefault(re.escape(spelled), (len(spelled), spelled))
    ordered = sorted(alternatives, key=lambda source: -alternatives[source][0])
    found = tuple((alternatives[source][1], source) for source in ordered)
    return found, sorted(spellings, key=len, reverse=True)


@lru_cache(maxsize=256)
def _compiled(sources: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(sources))


def _cut_prefix(text: str, secrets: list[str], shortest: int) -> int:
    """The length of the longest beginning of a secret that `text` ends with (0: none, or one
    shorter than `shortest`)."""
    if not text:
        return 0
    last = text[-1]
    longest = 0
    for value in secrets:
        size = min(len(value) - 1, len(text))
        while size >= max(shortest, longest + 1):
            # Only lengths whose last character is the text's last one can match.
            size = value.rfind(last, 0, size) + 1
            if size < max(shortest, longest + 1):
                break
            if text.endswith(value[:size]):
                longest = size
                break
            size -= 1
    return longest


def window_bytes(secrets: Iterable[str]) -> int:
    """How many bytes of output to read for a tail: the tail, and before it a margin at least
    as long as the longest secret, in the longest of its spellings."""
    longest = max((longest_spelling_chars(s) for s in secrets), default=0)
    return TAIL_BYTES + max(REDACTION_MARGIN_BYTES, longest)


def cut_tail(
    data: bytes,
    secrets: Iterable[str],
    *,
    from_start: bool,
    lines: int = TAIL_LINES,
    max_bytes: int = TAIL_BYTES,
) -> Tail:
    """The last `lines` lines (at most `max_bytes` bytes) of `data`, secrets redacted.

    `from_start`: `data` is the whole output. Otherwise it is the end of a longer output read
    with a margin (`window_bytes`): only what follows the margin is kept, redacted with the
    margin in sight, and its first line (likely a piece) is dropped."""
    text = data.decode("utf-8", errors="replace")
    margin = 0 if from_start else max(0, len(data) - max_bytes)
    start = len(data[:margin].decode("utf-8", errors="replace")) if margin else 0
    kept = redact(text, secrets, start=start, cut_end=True).splitlines()
    truncated = not from_start
    if not from_start and len(kept) > 1:
        kept = kept[1:]  # a piece of a line (one long line is kept: its end is the news)
    if len(kept) > lines:
        kept, truncated = kept[-lines:], True
    while kept and len("\n".join(kept).encode()) > max_bytes:
        if len(kept) == 1:
            # One long line: keep its end, whole characters only.
            end = kept[0].encode()[-max_bytes:]
            kept = [end.decode("utf-8", errors="ignore")]
        else:
            kept = kept[1:]
        truncated = True
    return Tail(text="\n".join(kept), truncated=truncated)


def markdown_block(text: str) -> str:
    """`text` as a fenced Markdown code block whose fence no run of backticks in it can end."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"
