"""One renderer of what a run's status says: the facts `overnight status` (the CLI's text,
overnight/cli/render.py) and the Web UI's card (card.py) both show. Pure.

Each fact is made here once, as plain text; each of the two lays the facts out by its table
of rows (`lay_out`): its own order, labels and escaping (terminal text or Markdown), which
stay as they were, since `overnight status` prints a contract and the card is written into
the run's history. What only one of them shows (the CLI's budget left, the card's budget
line) it makes itself, as facts too, and places by the same table. Here, and not in the
ground, because the stall watch's words are the decision core's (stall_watch.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from overnight.core.ci_rounds import ci_line
from overnight.core.egress import refusal_words
from overnight.core.models import RunStatus
from overnight.core.status_lines import (
    done_check_line,
    moment,
    money_line,
    needs_you_line,
    safety_net_line,
    snapshot_line,
    talk_lines,
)
from overnight.core.workspace_spec import workspace_line
from workflows.pure.stall_watch import stall_coming


@dataclass(frozen=True)
class Fact:
    """One line of a run's status. `key` names the row that shows it; `text` is plain, not
    escaped (agent text as written, ids marked as code in backticks); `label` is the fact's
    own, for a row that names none (a talk line's: an output's name is the agent's)."""

    key: str
    text: str
    label: str = ""


# How a row shows a fact's text (and its own label): as it is, or escaped its sink's way.
Shown = Callable[[str], str]
# A sink's row: the key of the facts it shows, their label (None: each fact's own) and how.
Row = tuple[str, str | None, Shown]


def status_facts(
    status: RunStatus, now: datetime, *, live: bool = True, stamped: bool = False
) -> list[Fact]:
    """The facts of `status` that both show, in no order (each sink's rows order them).
    `live`: a past moment as its age, else as its time of day (a finished run's card, read
    later); `stamped`: a moment to come with its time of day too (the card is written at a
    wake and read later)."""
    summary = status.checkpoint_summary
    next_step = summary.next if summary is not None and summary.next is not None else "-"
    coming = stall_coming(status, now)
    if coming and stamped and status.stalls_at is not None:
        coming += f" ({status.stalls_at:%H:%M:%S} UTC)"
    pushed = status.pushed_commit
    said = {
        "last progress": moment(status.last_progress_at, now, live=live),
        "stall watch": coming,
        "network": refusal_words(status.egress_refused),
        "charged": money_line(status),
        "sandbox": status.isolation,
        "snapshot": snapshot_line(status, now, live=live),
        "failed": status.failure,
        "cancelled": status.cancel_reason,
        "needs you": needs_you_line(status),
        "safety net": safety_net_line(status.safety_net),
        "done check": done_check_line(status),
        "workspace": workspace_line(status.workspace),
        "pushed": pushed[:12] if pushed else None,  # the commit: each sink says where it is
        "pull request": status.pull_request_url,
        "CI": ci_line(status.ci),
    }
    # The next step is always said (an empty one too: each sink shows it its way).
    facts = [Fact("next step", next_step)]
    facts += [Fact(key, text) for key, text in said.items() if text]
    return facts + [Fact("talk", text, label) for label, text in talk_lines(status)]


def lay_out(
    facts: Iterable[Fact], rows: Sequence[Row], line: Callable[[str, str], str]
) -> list[str]:
    """The lines of `facts` in the order of `rows`, each `line(label, text)` with its label
    and text shown as its row says; a fact no row names is not shown (its sink shows none)."""
    by_key: dict[str, list[Fact]] = {}
    for fact in facts:
        by_key.setdefault(fact.key, []).append(fact)
    return [
        line(shown(fact.label) if label is None else label, shown(fact.text))
        for key, label, shown in rows
        for fact in by_key.get(key, [])
    ]
