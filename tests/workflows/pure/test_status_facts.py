"""One renderer of a run's status (workflows/pure/status_facts.py): the facts `overnight status`
and the Web UI's card both show are made once, and each lays them out by its rows."""

from __future__ import annotations

from overnight.cli.render import STATUS_ROWS, status_text
from overnight.core.agent_text import terminal_line
from overnight.core.done_check import DoneCheck
from overnight.core.models import RunStatus
from overnight.core.run_costs import SafetyNet
from tests.workflows.pure.test_card import NOW, rich
from tests.workflows.pure.test_decide import T0
from workflows.pure.card import CARD_ROWS, build_status, render_card
from workflows.pure.status_facts import Fact, lay_out, status_facts

# The facts both show: each has a row in both tables, under its own label there.
SHARED = {
    "next step",
    "last progress",
    "stall watch",
    "network",
    "charged",
    "sandbox",
    "snapshot",
    "failed",
    "cancelled",
    "needs you",
    "talk",
    "safety net",
    "done check",
    "workspace",
    "pushed",
    "pull request",
    "CI",
}


def _status() -> RunStatus:
    checks = [
        DoneCheck(command="pytest -q", index=0, round=2, passed=False, exit_code=1, at=T0, tail="F")
    ]
    net = SafetyNet(restarts=2, usd=0.01, by_cause={"crashed": 1, "stalled": 1})
    state = rich(
        done_results=checks,
        net_totals=net,
        pushed_commit="0123456789abcdef",
        pull_request_url="https://github.example/o/r/pull/7",
        cancel_requested=True,
        cancel_reason="enough",
    )
    return build_status(state, NOW)


def test_each_fact_both_show_has_a_row_in_both_and_no_other_is_made_for_both() -> None:
    status = build_status(rich(), NOW)
    assert {fact.key for fact in status_facts(status, NOW)} <= SHARED
    for rows in (STATUS_ROWS, CARD_ROWS):
        assert SHARED <= {key for key, _, _ in rows}
        keys = [key for key, _, _ in rows]
        assert len(keys) == len(set(keys))  # a fact is shown once


def test_both_say_each_fact_the_same_under_their_labels_and_escaping() -> None:
    status = _status()
    text, card = status_text(status, now=NOW, ui_url=None), render_card(status, NOW)
    assert "  pushed:        0123456789ab, on the origin" in text.splitlines()
    assert "- **pushed** `0123456789ab`, on the origin" in card.splitlines()
    assert "  pull request:  https://github.example/o/r/pull/7" in text.splitlines()
    assert "- **pull request** <https://github.example/o/r/pull/7>" in card.splitlines()
    assert "  cancelled:     enough" in text.splitlines()
    assert "- **cancelled** enough" in card.splitlines()
    assert "  step:          write the [parser](x)" in text.splitlines()
    assert "- **next step** write the \\[parser\\](x)" in card.splitlines()


def test_the_rows_order_the_facts_and_show_each_its_way() -> None:
    facts = [
        Fact("b", "two\nlines"),
        Fact("talk", "x", "output n\n1"),
        Fact("a", "one"),
        Fact("talk", "y", "result"),
        Fact("none", "no row shows it"),
    ]
    rows = (("a", "first", str.upper), ("talk", None, terminal_line), ("b", "B", terminal_line))
    lines = lay_out(facts, rows, lambda label, text: f"{label}={text}")
    assert lines == ["first=ONE", "output n 1=x", "result=y", "B=two lines"]


def test_an_ended_runs_card_says_times_of_day_and_the_status_ages() -> None:
    status = build_status(rich(state="finished"), NOW)
    said = {fact.key: fact.text for fact in status_facts(status, NOW, live=False)}
    assert said["last progress"] == f"{status.last_progress_at:%H:%M:%S} UTC"
    assert {fact.key: fact.text for fact in status_facts(status, NOW)}["last progress"] == (
        "20m ago"
    )
