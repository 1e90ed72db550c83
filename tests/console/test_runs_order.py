"""The runs list's decisions without a server: the order of its groups, what its filters keep,
the events that move a row when its group changes, and a row drawn from what an agent wrote."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

from overnight.console.render import fragment
from overnight.console.rows import RunRow
from overnight.console.runs_order import RunFilters, group_of, ordered
from overnight.console.runs_page import row_events

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def row(run_id: str, state: str, *, hours_ago: float = 1, **changes: object) -> RunRow:
    closed = state in ("finished", "cancelled", "failed", "terminated", "timed_out")
    made = RunRow(
        run_id=run_id,
        state=state,
        closed=closed,
        started_at=NOW - timedelta(hours=hours_ago),
        has_row=True,
    )
    return replace(made, **changes)  # type: ignore[arg-type]


def test_who_needs_a_person_comes_first_then_running_then_ended() -> None:
    rows = [
        row("done", "finished", hours_ago=0.1),
        row("going", "running", hours_ago=0.2),
        row("asks", "waiting_for_answer", hours_ago=5),
        row("stuck-old", "needs_attention", hours_ago=9),
        row("stuck-new", "needs_attention", hours_ago=2),
        row("starting", "starting", hours_ago=0.3),
    ]
    groups = [(name, [r.run_id for r in rows]) for name, _, rows in ordered(rows)]
    assert groups == [
        ("attention", ["stuck-new", "stuck-old"]),
        ("waiting", ["asks"]),
        ("running", ["going", "starting"]),
        ("ended", ["done"]),
    ]
    # A failed run that last said it needed attention has ended: it is not "needs you" now.
    assert group_of(row("gave-up", "failed", last_state="needs_attention")) == "ended"


def test_the_filters_keep_what_they_name() -> None:
    team = row("a", "running", owner="data", labels=["nightly"], agent="codex", hours_ago=30)
    other = row("b", "needs_attention", owner="web", agent="claude-code", hours_ago=1)
    query = {"owner": "data", "label": "nightly", "agent": "codex", "state": "running"}
    kept = RunFilters.from_query(query)
    assert [kept.keeps(r) for r in (team, other)] == [True, False]
    assert RunFilters.from_query({"state": "attention"}).keeps(other)
    today = RunFilters.from_query({"since": NOW.date().isoformat()})
    assert [today.keeps(r) for r in (team, other)] == [False, True]
    before = RunFilters.from_query({"until": (NOW.date() - timedelta(days=1)).isoformat()})
    assert [before.keeps(r) for r in (team, other)] == [True, False]
    # What it cannot use is no filter: an unknown state, a date that is not one.
    loose = RunFilters.from_query({"state": "<script>", "since": "yesterday"})
    assert loose == RunFilters() and loose.query() == {}
    assert RunFilters(since=date(2026, 12, 1)).query() == {"since": "2026-12-01"}


class Snapshot:
    def __init__(self, rows: list[RunRow]) -> None:
        self.by_id = {r.run_id: r for r in rows}

    def row(self, run_id: str) -> RunRow | None:
        return self.by_id.get(run_id)


def test_a_row_whose_group_changed_is_moved_and_the_counts_follow() -> None:
    shown = {"a": "waiting", "b": "running"}
    runs = Snapshot([row("a", "running"), row("b", "running")])
    news = [
        (line.split("\n")[0], json.loads(line.split("\n")[1][len("data: ") :]))
        for line in row_events(runs, RunFilters(), frozenset({"a"}), frozenset(), shown, NOW)
    ]
    assert [(kind, data.get("id"), data.get("parent")) for kind, data in news[:2]] == [
        ("event: remove", "run-a", None),
        ("event: replace", "run-a", "rows-running"),
    ]
    counts = {data["id"]: data["html"] for kind, data in news[2:]}
    assert ">2<" in counts["count-running"] and ">0<" in counts["count-waiting"]
    assert shown == {"a": "running", "b": "running"}

    gone = row_events(runs, RunFilters(), frozenset(), frozenset({"b"}), shown, NOW)
    assert gone[0] == 'event: remove\ndata: {"id": "run-b"}\n\n' and shown == {"a": "running"}
    # A row the filters no longer keep leaves the page.
    owned = RunFilters(owner="someone")
    assert row_events(runs, owned, frozenset({"a"}), frozenset(), shown, NOW)[0].startswith(
        "event: remove"
    )


def test_a_row_shows_what_the_agent_wrote_as_text() -> None:
    said = '<img src=x onerror="alert(1)"> [Approve](https://evil.example)'
    hostile = row(
        "bad",
        "waiting_for_answer",
        next_step=said,
        question=said,
        choices=["<b>yes</b>"],
        pull_request_url="javascript:alert(1)",
    )
    html = fragment("_run_row.html", {"row": hostile, "group": "waiting", "now": NOW})
    assert "<img" not in html and "<b>" not in html and "javascript:" not in html
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt; [Approve](https://evil.example)" in html
    assert html.count("<a ") == 1  # the run's own page, nothing else
    unknown = replace(hostile, has_row=False, spend_usd=0.0)
    assert "$0.00" not in fragment("_run_row.html", {"row": unknown, "group": "x", "now": NOW})


def test_a_failed_runs_row_says_why_as_text() -> None:
    """A failed run's row gave no reason: its page had to be opened to learn it."""
    why = "run bad cannot start: field agent_dir: <b>/x</b> is not a folder on this worker"
    failed = row("bad", "failed", failure=why)
    html = fragment("_run_row.html", {"row": failed, "group": "ended", "now": NOW})
    assert "<b>" not in html
    assert (
        '<div class="agent-text failure">run bad cannot start: field agent_dir: '
        "&lt;b&gt;/x&lt;/b&gt; is not a folder on this worker</div>"
    ) in html
