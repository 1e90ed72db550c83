"""The kept workspace's diff as the run page shows it: per file, each line marked added,
removed or context, and its text split into pygments tokens for syntax highlighting.

What `overnight diff --step N` shows (overnight/cli/workspace.py: from the workspace kept at
the checkpoint before N, or the run's base for its first, to the workspace kept at N: step N's
own work; fetched into a temporary bare repository where nothing of the agent's runs), read
the same way and parsed here. `parse` and `highlight` are pure.

The diff is the agent's: names, lines and all. Nothing here makes HTML: the template writes
each token as the text of a `<span>` whose class is pygments' (`HtmlFormatter`'s names, the
colours in `static/diff.css`), through autoescape; control characters are shown as their
escapes first (overnight.core.agent_text.terminal_safe).
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from pygments import lex  # type: ignore[import-untyped]
from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers import get_lexer_for_filename  # type: ignore[import-untyped]
from pygments.lexers.special import TextLexer  # type: ignore[import-untyped]
from pygments.token import STANDARD_TYPES, _TokenType  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

from overnight.core.agent_text import terminal_line, terminal_safe
from overnight.core.workspace_spec import KeptWorkspace

# What the page shows of one diff at most: the rest is left to `overnight diff`.
MAX_DIFF_BYTES = 2 * 1024 * 1024
MAX_LINES = 20_000
# A line longer than this is not highlighted (a minified file, a lock file), only shown.
MAX_HIGHLIGHT_CHARS = 2000
# Diffs kept in this process (a kept commit never changes: its diff is fetched once).
CACHE_SIZE = 32

LineKind = Literal["add", "del", "ctx", "hunk", "meta", "note"]
_FILE_START = "diff --git "
# Where git's unquoted `a/X b/Y` may be split when X and Y differ (a rename): the last ` b/`.
_UNQUOTED_PAIR = re.compile(r"^a/(.*) b/(.*)$")
# git's C quoting of a name with a quote, a backslash, a control or a non-ASCII byte.
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_CSS_PREFIX = "tok-"


@dataclass(frozen=True)
class Token:
    css: str
    text: str


@dataclass
class DiffLine:
    kind: LineKind
    text: str
    tokens: list[Token] = field(default_factory=list)


@dataclass
class FileDiff:
    path: str
    old_path: str
    change: str  # "added", "deleted", "renamed", "changed", "binary"
    added: int = 0
    removed: int = 0
    lines: list[DiffLine] = field(default_factory=list)
    in_hunks: bool = False


@dataclass(frozen=True)
class ShownDiff:
    files: list[FileDiff]
    truncated: bool


def parse(text: str, *, max_lines: int = MAX_LINES) -> ShownDiff:
    """git's `diff` output as files of marked lines. A binary patch's data is left out
    (the file is named and said binary); past `max_lines` the rest is left out."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    in_binary = False
    count = 0
    truncated = False
    for raw in text.split("\n"):
        if raw.startswith(_FILE_START):
            # Every file starts one, whatever its name: a name git quotes is a file of its
            # own too (else its lines would be shown as the file before's, or not at all).
            old, new = header_names(raw[len(_FILE_START) :])
            current = FileDiff(path=new, old_path=old, change="changed")
            files.append(current)
            in_binary = False
            continue
        if current is None or (raw == "" and not in_binary):
            continue
        if count >= max_lines:
            truncated = True
            break
        if in_binary:
            in_binary = raw != ""
            continue
        if current.change == "binary" and raw.startswith(("literal ", "delta ")):
            in_binary = True  # the reverse patch of a binary file
            continue
        kind = _kind_of(raw, current)
        if raw == "GIT binary patch" or raw.startswith("Binary files "):
            current.change = "binary"
            in_binary = raw == "GIT binary patch"
            current.lines.append(DiffLine("note", "binary file: its bytes are not shown"))
            count += 1
            continue
        if kind == "add":
            current.added += 1
        elif kind == "del":
            current.removed += 1
        current.lines.append(DiffLine(kind, raw))
        count += 1
    return ShownDiff(files=files, truncated=truncated)


def _kind_of(raw: str, current: FileDiff) -> LineKind:
    if raw.startswith("@@"):
        current.in_hunks = True
        return "hunk"
    if not current.in_hunks:
        if raw.startswith("new file mode"):
            current.change = "added"
        elif raw.startswith("deleted file mode"):
            current.change = "deleted"
        elif raw.startswith("rename from "):
            current.old_path = _name(raw[len("rename from ") :])
        elif raw.startswith("rename to "):
            current.change = "renamed"
            current.path = _name(raw[len("rename to ") :])
        elif raw.startswith("+++ ") and raw != "+++ /dev/null":
            # The name alone on its line: what `diff --git a/X b/Y` leaves unclear when the
            # names hold " b/" (git adds a tab after a name with a space).
            current.path = _unprefixed(_name(raw[4:].removesuffix("\t")), "b/")
        elif raw.startswith("--- ") and raw != "--- /dev/null":
            current.old_path = _unprefixed(_name(raw[4:].removesuffix("\t")), "a/")
        return "meta"
    if raw.startswith("+"):
        return "add"
    if raw.startswith("-"):
        return "del"
    if raw.startswith("\\"):
        return "note"  # "\ No newline at end of file"
    return "ctx"


def header_names(rest: str) -> tuple[str, str]:
    """The old and new names of a `diff --git <rest>` line: `a/X b/Y`, each side in git's C
    quotes when its name needs them."""
    if rest.startswith('"'):
        old, after = unquote(rest)
        after = after.lstrip(" ")
        new = unquote(after)[0] if after.startswith('"') else after
    elif rest.endswith('"') and ' "' in rest:
        cut = rest.rfind(' "b/')
        old, new = rest[:cut], unquote(rest[cut + 1 :])[0]
    else:
        half = (len(rest) - 1) // 2  # `a/X b/X`: the same name twice (not a rename)
        if rest[half:].startswith(" b/") and rest[2:half] == rest[half + 3 :]:
            return rest[2:half], rest[half + 3 :]
        found = _UNQUOTED_PAIR.match(rest)
        if found is None:
            return rest, rest
        return found.group(1), found.group(2)
    return _unprefixed(old, "a/"), _unprefixed(new, "b/")


def unquote(text: str) -> tuple[str, str]:
    """The C-quoted name git wrote at the start of `text` (`"..."`), and what follows it."""
    out = bytearray()
    at = 1
    while at < len(text):
        char = text[at]
        if char == '"':
            return out.decode("utf-8", errors="replace"), text[at + 1 :]
        if char == "\\" and at + 1 < len(text):
            code = text[at + 1 : at + 4]
            if len(code) == 3 and all(c in "01234567" for c in code):
                out.append(int(code, 8) & 0xFF)
                at += 4
                continue
            escaped = text[at + 1]
            out += bytes([_ESCAPES[escaped]]) if escaped in _ESCAPES else escaped.encode()
            at += 2
            continue
        out += char.encode("utf-8", errors="replace")
        at += 1
    return out.decode("utf-8", errors="replace"), ""


def _name(text: str) -> str:
    return unquote(text)[0] if text.startswith('"') else text


def _unprefixed(name: str, prefix: str) -> str:
    return name.removeprefix(prefix)


def highlight(diff: ShownDiff) -> ShownDiff:
    """Each file's lines split into tokens of its language (guessed from its name; plain text
    when pygments knows none), every token's text with its controls escaped."""
    for item in diff.files:
        lexer = _lexer_for(item.path)
        for line in item.lines:
            if line.kind in ("add", "del", "ctx"):
                mark, body = line.text[:1], line.text[1:]
                line.tokens = [Token("diff-mark", mark), *_tokens(body, lexer)]
            else:
                line.tokens = [Token("", terminal_safe(line.text))]
            line.text = terminal_safe(line.text)
        # A name on one line (git allows a newline in one), its controls escaped.
        item.path = terminal_line(item.path)
        item.old_path = terminal_line(item.old_path)
    return diff


def _lexer_for(path: str) -> Lexer:
    try:
        return get_lexer_for_filename(path, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def _tokens(body: str, lexer: Lexer) -> list[Token]:
    if len(body) > MAX_HIGHLIGHT_CHARS:
        return [Token("", terminal_safe(body))]
    found = []
    for kind, value in lex(body, lexer):
        if value:
            found.append(Token(css_class(kind), terminal_safe(value)))
    return found


def css_class(kind: _TokenType) -> str:
    """pygments' `HtmlFormatter` class of a token type (its nearest kind with a name)."""
    while kind not in STANDARD_TYPES:
        kind = kind.parent
    short = STANDARD_TYPES[kind]
    return short and f"{_CSS_PREFIX}{short}"


def style_css() -> str:
    """The colours of the token classes (what `static/diff.css` holds, kept equal by a test)."""
    from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped]

    rules = HtmlFormatter(style="default", classprefix=_CSS_PREFIX).get_style_defs(".diff")
    # Only the tokens' colours: the page's own rules set the background and the lines.
    return "\n".join(line for line in rules.splitlines() if f".{_CSS_PREFIX}" in line) + "\n"


# --- reading a kept workspace's diff (git, in a thread) ---------------------------------------

_cache: OrderedDict[tuple[str, str, str | None], ShownDiff] = OrderedDict()


async def kept_diff(
    repo: str, kept: KeptWorkspace, base: str | None, since: KeptWorkspace | None = None
) -> ShownDiff:
    """The diff `overnight diff --step N` shows (from `since`, the step before, when given;
    else from `base`), parsed and highlighted (cached: a kept commit never changes)."""
    from activities.sandbox_base.setup import clone_source
    from overnight.cli.workspace import diff_bytes

    assert kept.commit is not None
    start = since.commit if since is not None else base
    key = (repo, kept.commit, start)
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    # At most what is shown (and a byte to know there was more): the agent's files can be
    # of any size, git's output is not held whole.
    data = await asyncio.to_thread(
        partial(diff_bytes, clone_source(repo), kept, base, since=since, most=MAX_DIFF_BYTES + 1)
    )
    truncated = len(data) > MAX_DIFF_BYTES
    shown = parse(data[:MAX_DIFF_BYTES].decode("utf-8", errors="replace"))
    shown = highlight(ShownDiff(shown.files, shown.truncated or truncated))
    _cache[key] = shown
    while len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return shown
