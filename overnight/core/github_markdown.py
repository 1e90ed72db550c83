"""Agent text in GitHub Markdown (a pull request's title and body): one more sink of
overnight.core.agent_text's kind. Pure.

An agent's summary is Markdown a person wants rendered (lists, code), so it is kept as
Markdown, but nothing in it may act beyond the page or hide from its reader:

- no mention: `@name` and `@org/team` outside code get a fullwidth `＠`, which GitHub links
  to nobody, so an agent never pings a person or a team (in code GitHub mentions nobody, so
  code is left as written; an e-mail address is no mention either);
- nothing hidden: `<!--` outside code is written `&lt;!--`, so no HTML comment hides text
  from the reviewer while it stays in the body;
- what would not show (controls, bidirectional marks, zero-width characters) is shown as its
  escape (`\\x1b`, `\\u202e`), as everywhere else (overnight.core.agent_text).

`code_span` and `table_cell` put any text in an inline code span / a table's cell.
"""

from __future__ import annotations

import re

from overnight.core.agent_text import one_line, terminal_safe

FULLWIDTH_AT = "\uff20"
# `@` that starts a mention: not inside a word or an address (`a@b.c`), before a name.
_MENTION = re.compile(r"(?<![A-Za-z0-9_.+\-/])@(?=[A-Za-z0-9])")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)


def github_markdown(text: str) -> str:
    """Agent Markdown for a GitHub page: kept as Markdown, mentions and hidden comments
    defused outside code, what would not show escaped (see the module's docstring)."""
    lines = terminal_safe(text).split("\n")
    fence: str | None = None
    kept: list[str] = []
    for line in lines:
        opened = _FENCE.match(line)
        if fence is not None:
            if (
                opened is not None
                and opened.group(1)[0] == fence[0]
                and len(opened.group(1)) >= len(fence)
            ):
                fence = None
            kept.append(line)
            continue
        if opened is not None:
            fence = opened.group(1)
            kept.append(line)
            continue
        kept.append(_outside_code(line))
    return "\n".join(kept)


def github_inline(text: str) -> str:
    """Agent text on one line of a GitHub page (a title, a list item): one line, defused."""
    return _defuse(terminal_safe(one_line(text)))


def code_span(text: str) -> str:
    """`text` on one line as an inline code span no backtick in it can end."""
    flat = terminal_safe(one_line(text))
    longest = max((len(run) for run in re.findall("`+", flat)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def table_cell(markdown: str) -> str:
    """Markdown in a table cell: one line, its `|` escaped (GitHub splits cells on `|` even
    inside a code span unless it is written `\\|`)."""
    return one_line(markdown).replace("|", "\\|")


def _outside_code(line: str) -> str:
    parts: list[str] = []
    end = 0
    for span in _INLINE_CODE.finditer(line):
        parts.append(_defuse(line[end : span.start()]))
        parts.append(span.group(0))
        end = span.end()
    parts.append(_defuse(line[end:]))
    return "".join(parts)


def _defuse(text: str) -> str:
    return _MENTION.sub(FULLWIDTH_AT, text.replace("<!--", "&lt;!--"))
