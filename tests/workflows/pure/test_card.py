"""What a person sees of a run (workflows/pure/card.py): the `status` answer, built from the
run's state at one moment, and the Web UI's Markdown card rendered from it."""

from __future__ import annotations

from typing import Any

from overnight.core.agent_requests import AskRequest, ModelUsage, RunOutputs
from overnight.core.done_check import DoneCheck
from overnight.core.egress import refusal_words
from overnight.core.models import Budget, DailyLimit, LastWords, RestartRecord, SnapshotRecord
from overnight.core.output_tail import markdown_inline
from overnight.core.retry_note import RetryNote
from overnight.core.run_costs import SafetyNet
from overnight.core.status_lines import (
    done_check_line,
    money_line,
    safety_net_line,
    snapshot_line,
    talk_lines,
)
from overnight.core.workspace_spec import KeptWorkspace
from tests.workflows.pure.test_decide import T0, later, running, spec
from workflows.pure.card import CARD_TAIL_LINES, build_status, render_card
from workflows.pure.state import SupervisorState
from workflows.pure.state_groups import ChargeFigure

QUEUE = "overnight@host-b"


def minimal(**overrides: Any) -> SupervisorState:
    return running(**overrides)


def rich(**overrides: Any) -> SupervisorState:
    """A run that has been through most things: restarts, a host, a snapshot, a question."""
    run_spec = spec(
        budget=Budget(max_restarts=5, max_hours=8, max_spend_usd=3), keep_workspace=True
    )
    fields: dict[str, Any] = {
        "spec": run_spec,
        "budget": run_spec.budget,
        "state": "needs_attention",
        "attempt": 3,
        "sandbox_id": "pure-3",
        "process_id": "agent-3-1",
        "restarts_used": 2,
        "fresh_starts_used": 1,
        "restarts": [
            RestartRecord(attempt=1, reason="agent crashed (exit 1)", at=T0),
            RestartRecord(attempt=1, reason="agent crashed (exit 2)", at=T0),
            RestartRecord(attempt=2, reason="agent *stalled*", at=later(minutes=5)),
        ],
        "attention_reason": "spend budget used up",
        "daily_limit": DailyLimit(limit_usd=50, used_usd=10, remaining_usd=40, read_at=T0),
        "daily_window_wait": True,
        "checkpoint": '{"next": "write the [parser](x)", "notes": ["é"]}',
        "checkpoint_rejected": "checkpoint is over the 262144-byte cap",
        "lease_ends_at": later(hours=1),
        "lease_resumes": 2,
        "isolation": "bubblewrap, own network",
        "host_routing": True,
        "sandbox_hosts": {"pure-2": "overnight@host-a", "pure-3": QUEUE},
        "lost_hosts": ["overnight@host-a"],
        "last_words": LastWords(
            attempt=2, reason="agent stalled", at=later(minutes=5), tail="a\nb"
        ),
        "snapshots": [
            SnapshotRecord(snapshot_id="snap-1", mode="disk", taken_at=T0, attempt=1),
            SnapshotRecord(snapshot_id="snap-2", mode="disk", taken_at=later(minutes=1), attempt=2),
        ],
        "snapshots_taken": 2,
        "snapshot_failures": 1,
        "snapshot_pause_seconds": 1.23456,
        "snapshot_error": "disk full",
        "restored_from": "snap-1",
        "charges": {"pure-3": ChargeFigure(micros=123_456_789, estimated_usd=0.0, read_at=T0)},
        "agent_requests": True,
        "question": AskRequest(id="q1", question="Merge?", choices=["yes", "no"]),
        "waiting_since": later(minutes=10),
        "model_usage": {"a": ModelUsage(stream="a", usd=1 / 7)},
        "outputs": RunOutputs(summary="half"),
        "safety_net_kept": True,
        "failure": "run pure cannot start",
        "waiting_on": RetryNote(
            activity="create sandbox", sandbox_attempt=3, next_try=2, max_tries=5, message="busy"
        ),
        "workspace_keeping": True,
        "workspace_kept": [
            KeptWorkspace(
                number=4, outcome="pushed", at=T0, ref="refs/overnight/pure/4", commit="c4"
            )
        ],
        "egress_refused": {"pure-3": {"evil.example": 2}},
    }
    return running(**(fields | overrides))


NOW = later(minutes=20)


# ---- the status ------------------------------------------------------------------------------


def test_the_status_names_the_current_sandbox_or_else_the_last_paused_one() -> None:
    assert build_status(minimal(), NOW).sandbox_id == "box-1"
    between = minimal(sandbox_id=None, paused_sandboxes=["box-1", "box-2", "box-3"])
    assert build_status(between, NOW).sandbox_id == "box-3"
    assert build_status(minimal(sandbox_id=None), NOW).sandbox_id is None


def test_the_status_says_what_the_run_knows() -> None:
    state = rich()
    status = build_status(state, NOW)
    assert (status.run_id, status.state, status.attempt) == ("pure", "needs_attention", 3)
    assert (status.sandbox_id, status.process_id) == ("pure-3", "agent-3-1")
    assert (status.restarts_used, status.fresh_starts_used) == (2, 1)
    assert status.budget == state.budget and status.restarts == state.attempts.restarts
    assert (status.daily_limit, status.waiting_for_daily_window) == (state.money.daily_limit, True)
    assert (status.started_at, status.last_progress_at) == (T0, T0)
    assert status.checkpoint_bytes == 50  # bytes, not characters: é is two
    assert status.checkpoint_summary is not None
    assert status.checkpoint_summary.next == "write the [parser](x)"  # read from the text
    assert status.checkpoint_rejected == "checkpoint is over the 262144-byte cap"
    assert status.attention_reason == "spend budget used up"
    assert (status.lease_ends_at, status.lease_resumes) == (later(hours=1), 2)
    assert status.isolation == "bubblewrap, own network"
    assert (status.host, status.lost_hosts) == ("host-b", ["host-a"])
    assert status.sandbox_hosts == {"pure-2": "host-a", "pure-3": "host-b"}
    assert status.last_words == state.attempts.last_words
    assert (
        status.latest_snapshot == state.snapshot.snapshots[-1]
        and status.snapshots == state.snapshot.snapshots
    )
    assert (status.snapshots_taken, status.snapshot_failures) == (2, 1)
    assert (status.snapshot_error, status.restored_from) == ("disk full", "snap-1")
    assert status.talk is not None and status.talk.question == "Merge?"
    assert status.outputs == RunOutputs(summary="half")
    assert status.safety_net is not None and status.safety_net.sandbox_usd > 123
    assert status.failure == "run pure cannot start"
    assert status.waiting_on == "create sandbox, try 2 of 5: busy"
    assert status.workspace is not None and status.workspace.kept == state.workspace.workspace_kept
    assert status.egress_refused == {"evil.example": 2}


def test_the_status_gives_hours_and_money_to_four_places() -> None:
    status = build_status(rich(waiting_since=later(minutes=19)), NOW)
    assert (status.hours_used, status.wait_hours_used) == (0.3167, 0.0167)
    assert status.spend_estimated_usd == 0.0267  # 20 minutes at $0.08 an hour
    assert status.spend_charged_usd == 123.4568
    # The provider's figure, the estimate of the time since it was read, the model's spend.
    assert status.spend_usd == round(123.456789 + 0.08 / 3 + 1 / 7, 4)
    assert status.spend_model_usd == 0.1429
    assert status.snapshot_pause_seconds == 1.235  # seconds to three


def test_a_run_with_no_provider_figure_and_no_checkpoint_says_so() -> None:
    status = build_status(minimal(), NOW)
    assert (status.spend_charged_usd, status.checkpoint_bytes) == (None, 0)
    assert (status.checkpoint_summary, status.latest_snapshot, status.waiting_on) == (
        None,
        None,
        None,
    )
    assert (status.host, status.safety_net, status.workspace) == (None, None, None)


def test_the_daily_window_and_the_attention_reason_show_only_while_a_person_is_needed() -> None:
    status = build_status(rich(state="running"), NOW)
    assert (status.waiting_for_daily_window, status.attention_reason) == (False, None)
    status = build_status(rich(daily_window_wait=False), NOW)
    assert (status.waiting_for_daily_window, status.attention_reason) == (
        False,
        "spend budget used up",
    )


# ---- the card --------------------------------------------------------------------------------


def test_the_card_of_a_run_just_started() -> None:
    card = render_card(build_status(minimal(), later()), later())
    assert card.splitlines() == [
        "### overnight run `pure`: **running**",
        "",
        "- **attempt** 1 · **sandbox** `box-1`",
        "- **next step** -",
        "- **restarts** 0/5 · **hours** 0.00 used, 24.00 left · **waits** 0.00 of 12 h · "
        "**spend** $0.00",
        "- **last progress** 0s ago",
    ]


def test_the_card_of_a_run_that_has_been_through_most_things() -> None:
    """Its own lines exactly; the lines it takes from overnight/core/status_lines.py as they say
    them. What the agent wrote (its next step, a restart's reason) is shown as written."""
    checks = [
        DoneCheck(command="pytest -q", index=0, round=2, passed=False, exit_code=1, at=T0, tail="F")
    ]
    net = SafetyNet(restarts=2, usd=0.01, by_cause={"crashed": 1, "stalled": 1})
    status = build_status(rich(done_results=checks, net_totals=net), NOW)
    talk = [f"- **{markdown_inline(k)}** {markdown_inline(v)}" for k, v in talk_lines(status)]
    assert render_card(status, NOW).splitlines() == [
        "### overnight run `pure`: **needs_attention**",
        "",
        "- **attempt** 3 · **sandbox** `pure-3` · **host** `host-b`",
        "- **next step** write the \\[parser\\](x)",
        "- **restarts** 2/5 · **hours** 0.17 used, 7.83 left · **waits** 0.17 of 12 h · "
        "**spend** $123.63 of $3.00",
        "- **last progress** 20m ago",
        f"- **network** {refusal_words(status.egress_refused)}",
        f"- **charged** {money_line(status)}",
        "- **lease ends** 23:00:00 UTC (woken 2x at its end)",
        "- **sandbox** bubblewrap, own network",
        f"- **snapshot** {snapshot_line(status, NOW)}",
        f"- **safety net** {safety_net_line(status.safety_net)}",
        "- **workspace** kept at checkpoint 4 (\\`refs/overnight/pure/4\\`)",
        "- **failed** run pure cannot start",
        "- **waiting on** create sandbox, try 2 of 5: busy",
        "- **needs attention** spend budget used up; overnight extend pure --spend USD",
        *talk,
        "- **checkpoint kept** checkpoint is over the 262144-byte cap",
        "- **last restart** attempt 2: agent \\*stalled\\*",
        f"- **done check** {markdown_inline(str(done_check_line(status)))}",
        "",
        "**last output** of attempt 2 (agent stalled, 22:05:00 UTC):",
        "",
        "```text",
        "a",
        "b",
        "```",
        "",
        "**done check output**:",
        "",
        "```text",
        "$ pytest -q",
        "F",
        "```",
    ]
    assert len(talk) == 3  # the question, the model spend, the result


def test_the_card_shows_the_last_lines_of_the_last_output_only() -> None:
    tail = "\n".join(f"line {n}" for n in range(1, 31))
    words = LastWords(attempt=2, reason="agent crashed (exit 1)", at=T0, tail=tail)
    card = render_card(build_status(minimal(last_words=words), NOW), NOW)
    shown = card.split("```text\n")[1].split("\n```")[0].splitlines()
    assert shown == [f"line {n}" for n in range(31 - CARD_TAIL_LINES, 31)]
    silent = LastWords(attempt=2, reason="agent crashed (exit 1)", at=T0, tail="")
    assert "last output" not in render_card(build_status(minimal(last_words=silent), NOW), NOW)


def test_the_card_leaves_out_what_is_not_there_and_never_counts_hours_below_zero() -> None:
    state = minimal(sandbox_id=None, lease_ends_at=later(hours=1), budget=Budget(max_hours=1))
    card = render_card(build_status(state, later(hours=3)), later(hours=3))
    assert "- **attempt** 1 · **sandbox** `-`" in card.splitlines()
    assert "**hours** 3.00 used, 0.00 left" in card
    assert "- **lease ends** 23:00:00 UTC" in card.splitlines()  # never woken: not said
