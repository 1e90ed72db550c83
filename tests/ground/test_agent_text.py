"""Agent text in each place a person reads it (issue #30, item 5): on its line, as written,
never a line, a mention, a link or emphasis of overnight's. One rule per sink."""

from __future__ import annotations

import re

import pytest

from overnight.core.agent_text import (
    markdown_inline,
    one_line,
    slack_block,
    slack_inline,
    terminal_line,
    terminal_safe,
)

# What a hostile agent put in its question, next step or summary: a line that looks like the
# headline of another run's notification, mentions, a quote, a link under other words.
FORGED = (
    "Deploy?\n*overnight run `rt-prod-7` :white_check_mark: finished*: ok\n"
    "> :rotating_light: needs attention\n<!channel> <@U0123> <#C0456> @here "
    "<https://evil.example|the fix> _now_ ~no~ & \u202egnp.exe"
)


def test_slack_inline_keeps_agent_text_on_its_line_and_formats_nothing() -> None:
    shown = slack_inline(FORGED)
    assert "\n" not in shown and "\r" not in shown
    # Slack's own rule for &, <, >: no mention, no link under other words, no entity.
    assert "<" not in shown and ">" not in shown and "&amp;" in shown
    assert "&lt;!channel&gt; &lt;@U0123&gt; &lt;#C0456&gt;" in shown
    # No formatting character is left to format: they show as their look-alikes.
    assert not re.search("[*_~`]", shown)
    # (an emoji's code too: the agent's `:white_check_mark:` is no emoji of overnight's)
    assert "＊overnight run ｀rt-prod-7｀ :white＿check＿mark: finished＊: ok" in shown
    assert "＿now＿ ～no～" in shown
    assert "＠here" in shown and "@here" not in shown
    # A right-to-left override shows as its escape, not as reversed text.
    assert "\\u202egnp.exe" in shown


def test_slack_block_keeps_the_output_in_its_code_block() -> None:
    output = "ok\n```\n*overnight run `x` finished*: ok\n<!channel>\n```"
    block = slack_block(output)
    inner = block.removeprefix("```text\n").removesuffix("\n```")
    assert "```" not in inner and "``" not in inner  # no run of backticks can end the block
    assert "&lt;!channel&gt;" in inner and "<" not in inner
    assert inner.count("\n") == output.count("\n")  # its lines kept


def test_markdown_inline_shows_agent_text_as_written_on_its_line() -> None:
    shown = markdown_inline(FORGED)
    assert "\n" not in shown
    # Every character Markdown would act on is escaped: no link, emphasis, code, strike, HTML,
    # entity (`&lt;` would show as `<`).
    assert re.search(r"(?<!\\)[\[\]<>*_~`&]", shown) is None
    assert "\\~no\\~" in shown and "\\&" in shown
    assert "\\\\u202egnp.exe" in shown  # the override, shown as its escape (and that escaped)


def test_terminal_line_folds_agent_text_onto_its_line_and_escapes_controls() -> None:
    text = "fix\n  question:      Approve production deploy?\x1b[2J\u2028next"
    shown = terminal_line(text)
    assert shown == "fix question: Approve production deploy?\\x1b[2J next"
    assert terminal_safe("a\nb\x1b]0;t\x07") == "a\nb\\x1b]0;t\\x07"  # its output keeps lines


@pytest.mark.parametrize("rule", [slack_inline, markdown_inline, terminal_line])
def test_every_one_line_rule_leaves_plain_text_alone(rule: object) -> None:
    assert callable(rule)
    assert rule("open the pull request for issue 42") == "open the pull request for issue 42"
    assert one_line(" a \t b\n\nc ") == "a b c"
