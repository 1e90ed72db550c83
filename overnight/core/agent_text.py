"""Agent text as each place that shows it to a person must write it: one rule per sink. Pure.

An agent's question, next step, notes, summary and outputs are text a hostile agent chose. Where
a person reads them beside overnight's own words, they must show as written and stay where
they are put: on their line, in their field, never as a link, a mention, emphasis, a heading
or a line that looks like overnight's.

- `slack_inline` / `slack_block`: a Slack message (mrkdwn), in a line / in a code block;
- `markdown_inline`: the Web UI's card and summaries (Markdown);
- `terminal_line` / `terminal_safe`: `overnight status` and the other commands, on one line /
  on the lines it has (its output); `terminal_json`: a command's `--json` document. Every
  write of the `overnight` command goes through one of them (overnight/cli/terminal_output.py);
- JSON notifications: none. The body is data, each value a JSON string in its own field: a
  receiver that puts one on a page applies that page's rule (as above), and never reads one
  as markup or as a field of its own.

Every rule shows what a person would not see, or what would move the text, as its escape:
C0 and C1 controls, the bidirectional marks, overrides and isolates that make text read
otherwise than it is held, and the zero-width characters that hide inside words (`\\u202e`,
`\\u200b`).
"""

from __future__ import annotations

import re

# Shown as their escapes: controls (but tab, newline and a carriage return before a newline,
# which `terminal_safe` keeps), DEL, C1, zero-width characters and bidirectional controls.
_UNSHOWN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u2069\ufeff]|\r(?!\n)"
)


def one_line(text: str) -> str:
    """`text` on one line: every run of whitespace (newlines, Unicode line and paragraph
    separators too) one space, none at either end."""
    return " ".join(text.split())


def terminal_safe(text: str) -> str:
    """`text` (agent bytes: output, checkpoint notes, file names) with every control character
    shown as its escape (`\\x1b`, `\\u202e`), so printing it cannot move the cursor, clear
    the screen or retitle the operator's terminal. Newlines and tabs are kept."""
    return _UNSHOWN.sub(_escape, text)


def terminal_json(document: str) -> str:
    """A JSON document bound for a terminal: what `terminal_safe` escapes, written as JSON's
    own escape (`\\u001b`), so the document parses to the same values. (JSON already escapes
    C0 controls inside its strings; DEL, C1 and the bidirectional and zero-width characters
    it leaves as they are.)"""
    return _UNSHOWN.sub(_json_escape, document)


def terminal_line(text: str) -> str:
    """Agent text on one line of a terminal beside overnight's labels: one line (a newline
    would begin a line of its own, as `  question:  ...`), its controls escaped."""
    return terminal_safe(one_line(text))


# What makes Markdown of inline text: links and images (`[`, `]`), autolinks and HTML (`<`,
# `>`), emphasis (`*`, `_`), strikethrough (`~`), code (a backtick), entities (`&`: `&lt;`
# would show as `<`) and the escape itself.
_MARKDOWN_INLINE = str.maketrans({c: "\\" + c for c in "\\`*_~[]<>&"})


def markdown_inline(text: str) -> str:
    """Agent text on one line of a Markdown card, shown as it is written: every run of
    whitespace one space (a newline would start a line of its own), and nothing in it a link,
    an image, emphasis or an entity (`[Approve](https://evil.example)` shows as those
    characters); what would not show is shown as its escape."""
    return _UNSHOWN.sub(_escape, one_line(text)).translate(_MARKDOWN_INLINE)


# Slack's mrkdwn has no escape for its formatting characters: `*bold*`, `_italic_`,
# `~strike~` and `` `code` `` are made by the characters themselves. Each is written as its
# fullwidth look-alike, which Slack shows and never formats (a zero-width character beside it
# is no sure stop: Slack takes one for a word's boundary, which starts formatting). Copied from
# Slack, such text holds the look-alikes: the JSON notification and `overnight status` hold
# the text as written.
_SLACK_LOOK_ALIKES = {"*": "\uff0a", "_": "\uff3f", "~": "\uff5e", "`": "\uff40"}
# Slack's own rule for the three characters it reads as markup: `<!channel>`, `<@U123>`,
# `<#C123>` and `<url|label>` are made with `<` and `>`, entities with `&`.
_SLACK_ENTITIES: dict[str, str | int | None] = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_SLACK_INLINE = str.maketrans({**_SLACK_ENTITIES, **_SLACK_LOOK_ALIKES})
_SLACK_BLOCK = str.maketrans(dict(_SLACK_ENTITIES))
# Mentions Slack may make of plain words (an app with `link_names`, or a legacy webhook).
_SLACK_BROADCAST = re.compile(r"@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)


def slack_inline(text: str) -> str:
    """Agent text in a line of a Slack message, shown as written: one line (no line of its
    own, so no `>` quote and no line that looks like overnight's headline), no mention, link
    or emphasis (`&`, `<`, `>` as Slack's entities; `* _ ~` and the backtick as fullwidth
    look-alikes; the `@` of `@channel`, `@here`, `@everyone` as `＠`)."""
    shown = _UNSHOWN.sub(_escape, one_line(text)).translate(_SLACK_INLINE)
    return _SLACK_BROADCAST.sub("\uff20", shown)


def slack_block(text: str) -> str:
    """Agent text (its output) as a Slack code block: its lines kept, `&`, `<`, `>` as Slack's
    entities and `@channel`'s `@` as `＠` (mentions are read in code blocks too), and no run of
    backticks that could end the block (a word joiner between two backticks)."""
    shown = terminal_safe(text).translate(_SLACK_BLOCK)
    shown = _SLACK_BROADCAST.sub("\uff20", re.sub("(?<=`)`", "\u2060`", shown))
    return f"```text\n{shown}\n```"


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(found: re.Match[str]) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in found.group())
