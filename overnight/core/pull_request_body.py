"""The title and body of a run's pull request, from what the run knows. Pure.

The body says what a reviewer needs before reading the diff: the agent's summary (quoted, as
the agent's words), the done checks and their results, the attempts and restarts with their
causes, what the run spent and what its safety net cost, the kept steps (each one
`overnight diff RUN --step N` away) and a link to the run. A repository's pull request
template is filled, not replaced: its sections are kept, the summary placed under its first
heading (on top when it has none), the run's facts after it. GitHub refuses a body over
65,536 characters, so the body is cut to fit: the summary first, then the lists.

Agent text goes through overnight.core.github_markdown: kept as Markdown, its mentions, hidden
comments and unseen characters defused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from overnight.core.done_check import DoneCheck
from overnight.core.github_markdown import code_span, github_inline, github_markdown, table_cell
from overnight.core.models import RestartRecord
from overnight.core.output_tail import markdown_block
from overnight.core.run_costs import SafetyNet
from overnight.core.status_lines import safety_net_line
from overnight.core.workspace_spec import KeptWorkspace

# GitHub's limit on a pull request's body, and what this module aims under (room to spare).
GITHUB_BODY_LIMIT = 65_536
MAX_BODY_CHARS = 60_000
MAX_TITLE_CHARS = 120
# Lists longer than this show their last entries and say how many came before.
MAX_LISTED = 20
REASON_CHARS = 300
_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# The least room worth giving the summary before the run's facts are shortened.
MIN_SUMMARY_ROOM = 2_000
CUT_NOTE = "\n\n*(cut to fit GitHub's limit on a pull request's body)*"


@dataclass(frozen=True)
class PullRequestFacts:
    run_id: str
    summary: str = ""  # the agent's (its kit's `finish()` or a coding agent's last words)
    title: str = ""  # the spec's; "" takes the summary's first line
    done_checks: Sequence[DoneCheck] = ()
    attempts: int = 1
    restarts: Sequence[RestartRecord] = ()
    fresh_starts: int = 0
    hours_used: float = 0
    spend_usd: float = 0
    spend_model_usd: float = 0
    safety_net: SafetyNet | None = None
    kept: Sequence[KeptWorkspace] = ()
    # CI rounds: times the agent was started again for a failing check, and those checks.
    ci_rounds: int = 0
    ci_failed: Sequence[str] = ()
    run_link: str = ""
    template: str | None = None


@dataclass(frozen=True)
class PullRequestText:
    title: str
    body: str


def pull_request_text(facts: PullRequestFacts) -> PullRequestText:
    return PullRequestText(pull_request_title(facts), pull_request_body(facts))


def pull_request_title(facts: PullRequestFacts) -> str:
    """The spec's title, else the summary's first line, else one naming the run."""
    chosen = facts.title.strip()
    if not chosen:
        first = next((line for line in facts.summary.splitlines() if line.strip()), "")
        chosen = first.strip().lstrip("#>*-+ \t").strip()
    if not chosen:
        chosen = f"overnight run {facts.run_id}"
    title = github_inline(chosen)
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1] + "…"


def pull_request_body(facts: PullRequestFacts, limit: int = MAX_BODY_CHARS) -> str:
    """The body, at most `limit` characters (see the module's docstring): the summary gets
    the room the run's facts leave; when they leave too little, they shrink first (no
    failed check's output, then only the last few restarts and steps)."""
    body = ""
    for listed, tails in ((MAX_LISTED, True), (MAX_LISTED, False), (3, False)):
        facts_part = run_facts(facts, listed=listed, tails=tails)
        room = limit - len(_assemble(facts.template, "", facts_part)) - 2
        body = _assemble(facts.template, _summary_block(facts.summary, room), facts_part)
        if len(body) <= limit and room >= MIN_SUMMARY_ROOM:
            return body
    if len(body) <= limit:
        return body
    return body[: limit - len(CUT_NOTE)].rsplit("\n", 1)[0] + CUT_NOTE


def run_facts(facts: PullRequestFacts, *, listed: int = MAX_LISTED, tails: bool = True) -> str:
    """The run's own sections (overnight's words, agent text escaped)."""
    sections = [
        _checks_section(facts.done_checks, tails),
        _attempts_section(facts, listed),
        _ci_section(facts, listed),
        _spend_section(facts),
        _kept_section(facts.run_id, facts.kept, listed),
    ]
    run = f"[{facts.run_id}]({facts.run_link})" if facts.run_link else code_span(facts.run_id)
    sections.append(f"Opened by overnight for the run {run}.")
    return "\n\n".join(s for s in sections if s)


def _assemble(template: str | None, summary: str, facts_part: str) -> str:
    facts_part = "---\n\n" + facts_part
    if template is None or not template.strip():
        return f"{summary}\n\n{facts_part}\n" if summary else f"{facts_part}\n"
    lines = template.replace("\r\n", "\n").strip("\n").split("\n")
    at = _first_heading(lines)
    if at is None:
        return "\n\n".join(p for p in (summary, "\n".join(lines), facts_part) if p) + "\n"
    head, rest = "\n".join(lines[: at + 1]), "\n".join(lines[at + 1 :])
    return "\n\n".join(p for p in (head, summary, rest.strip("\n"), facts_part) if p) + "\n"


def _first_heading(lines: list[str]) -> int | None:
    fence: str | None = None
    for index, line in enumerate(lines):
        opened = _FENCE.match(line)
        if opened is not None:
            mark = opened.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
        elif fence is None and _HEADING.match(line):
            return index
    return None


def _summary_block(summary: str, room: int) -> str:
    """The agent's summary, quoted, in at most `room` characters (cut at a line's end)."""
    text = summary.strip()
    if not text:
        return "*The agent left no summary.*"
    lead = "**The agent's summary:**\n\n"
    whole = lead + _quote(github_markdown(text))
    if len(whole) <= room:
        return whole
    budget = room - len(lead) - len(CUT_NOTE)
    while budget > 0:
        cut = text[:budget]
        if "\n" in cut:
            cut = cut.rsplit("\n", 1)[0]  # whole lines
        block = lead + _quote(github_markdown(cut)) + CUT_NOTE
        if len(block) <= room:
            return block
        budget = min(budget, len(cut)) - (len(block) - room)
    return lead + CUT_NOTE.strip()


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _checks_section(checks: Sequence[DoneCheck], tails: bool) -> str:
    if not checks:
        return ""
    last_round = max(check.round for check in checks)
    latest = sorted((c for c in checks if c.round == last_round), key=lambda c: c.index)
    failed_rounds = len({c.round for c in checks if not c.passed and c.round != last_round})
    lines = ["### Done checks", "", "| check | result | time |", "|---|---|---|"]
    for check in latest:
        result = "✅ passed" if check.passed else "❌ failed"
        if check.timed_out:
            result = "❌ timed out"
        elif check.exit_code is not None:
            result += f" (exit {check.exit_code})"
        elif check.problem:
            result += f": {github_inline(check.problem)[:REASON_CHARS]}"
        cells = (code_span(check.command), result, f"{check.seconds:.0f} s")
        lines.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
    if failed_rounds:
        lines += ["", f"They passed after {failed_rounds} failed round(s) the agent fixed."]
    for check in (c for c in latest if tails and not c.passed and c.tail):
        lines += [
            "",
            f"<details><summary>output of {code_span(check.command)}</summary>",
            "",
            markdown_block(github_markdown(check.tail)),
            "",
            "</details>",
        ]
    return "\n".join(lines)


def _attempts_section(facts: PullRequestFacts, listed: int) -> str:
    restarts = list(facts.restarts)
    said = f"{facts.attempts} attempt(s), {len(restarts)} restart(s)"
    if facts.fresh_starts:
        said += f", {facts.fresh_starts} fresh start(s) of the agent (a full context)"
    lines = ["### Attempts", "", said + ".", ""]
    if len(restarts) > listed:
        lines.append(f"- … {len(restarts) - listed} earlier restart(s)")
        restarts = restarts[-listed:]
    for record in restarts:
        reason = github_inline(record.reason)
        if len(reason) > REASON_CHARS:
            reason = reason[: REASON_CHARS - 1] + "…"
        lines.append(f"- attempt {record.attempt}: {reason}")
    return "\n".join(lines)


def _ci_section(facts: PullRequestFacts, listed: int) -> str:
    """The CI rounds: each failing check the agent was started again for (GitHub's words)."""
    if not facts.ci_rounds and not facts.ci_failed:
        return ""
    lines = ["### CI rounds", "", f"The agent fixed failing CI {facts.ci_rounds} time(s).", ""]
    failed = list(facts.ci_failed)[-listed:]
    lines += [
        f"- round {n}: {github_inline(line)[:REASON_CHARS]}"
        for n, line in enumerate(failed, start=1 + max(0, len(facts.ci_failed) - listed))
    ]
    return "\n".join(lines)


def _spend_section(facts: PullRequestFacts) -> str:
    spent = f"${facts.spend_usd:.2f} in {facts.hours_used:.1f} h"
    if facts.spend_model_usd:
        spent += f" (model calls ${facts.spend_model_usd:.2f})"
    lines = ["### Spend", "", spent + "."]
    net = safety_net_line(facts.safety_net)
    lines.append(f"The safety net cost {net}." if net else "The safety net cost nothing.")
    return "\n".join(lines)


def _kept_section(run_id: str, kept: Sequence[KeptWorkspace], listed: int) -> str:
    pushed = [k for k in kept if k.outcome == "pushed"]
    if not pushed:
        return ""
    lines = ["### Kept steps", "", "| step | commit | attempt | see it |", "|---|---|---|---|"]
    if len(pushed) > listed:
        lines.insert(2, f"The last {listed} of {len(pushed)}.\n")
        pushed = pushed[-listed:]
    for step in pushed:
        commit = code_span((step.commit or "")[:12]) if step.commit else "—"
        see = code_span(f"overnight diff {run_id} --step {step.number}")
        cells = (str(step.number), commit, str(step.attempt or "—"), see)
        lines.append("| " + " | ".join(table_cell(c) for c in cells) + " |")
    return "\n".join(lines)
