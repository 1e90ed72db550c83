"""A finished run's delivery, pure (`workflows.pure.delivery`, `decide.decide_resume`): the
commit a run names is only one its origin holds; an extension of a run whose push or pull
request waits tries it again whatever the budget; the facts its pull request's body is made
of; the pull request spec held where it is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from overnight.core.agent_requests import RunOutputs
from overnight.core.models import RestartRecord, RunSpec
from overnight.core.workspace_spec import KeptWorkspace
from tests.workflows.pure.fields import put
from workflows.pure import delivery
from workflows.pure.card import build_status, render_card
from workflows.pure.decide import DeliverAgain, WakeInPlace, decide_resume
from workflows.pure.notifications import notification
from workflows.pure.run_record import run_result
from workflows.pure.state import SupervisorState

T0 = datetime(2026, 1, 1, 22, 0, tzinfo=UTC)
AGENTS = "a" * 40
PUSHED = "b" * 40


def spec(**overrides: Any) -> RunSpec:
    return RunSpec.model_validate(
        {
            "run_id": "pure-delivery",
            "repo": "https://github.com/octo/app.git",
            "agent_dir": "/tmp/agent",
            "command": "true",
            **overrides,
        }
    )


def state(**fields: Any) -> SupervisorState:
    run = spec(**fields.pop("spec", {}))
    s = SupervisorState(spec=run, budget=run.budget, started_at=T0, attempt=1)
    return put(s, **fields)


FINISHED = RunOutputs(summary="added it", values={"commit": AGENTS, "branch": "agent/x"})


def test_a_run_that_pushes_names_no_commit_before_the_origin_holds_one() -> None:
    s = state(finish_pushes=True, outputs=FINISHED)
    shown = delivery.shown_outputs(s)
    assert shown is not None and shown.values == {"branch": "agent/x"}
    assert shown.summary == "added it"
    s.delivery.pushed_commit = PUSHED
    shown = delivery.shown_outputs(s)
    assert shown is not None and shown.values == {"commit": PUSHED, "branch": "agent/x"}
    # The run's own record is the agent's word, untouched.
    assert s.kit.outputs is not None and s.kit.outputs.values["commit"] == AGENTS


def test_a_run_begun_before_the_marker_shows_the_agents_outputs_as_they_were() -> None:
    s = state(finish_pushes=False, outputs=FINISHED)
    assert delivery.shown_outputs(s) == FINISHED
    assert delivery.shown_outputs(state(finish_pushes=True)) is None
    plain = RunOutputs(summary="x", values={"pr": "7"})
    assert delivery.shown_outputs(state(finish_pushes=True, outputs=plain)) == plain


def test_status_result_card_and_notification_name_the_pushed_commit_and_pull_request() -> None:
    url = "https://github.com/octo/app/pull/7"
    s = state(finish_pushes=True, outputs=FINISHED, pushed_commit=PUSHED, pull_request_url=url)
    s.state = "finished"
    status = build_status(s, T0)
    assert (status.pushed_commit, status.pull_request_url) == (PUSHED, url)
    assert status.outputs is not None and status.outputs.values["commit"] == PUSHED
    card = render_card(status, T0)
    assert f"- **pushed** `{PUSHED[:12]}`" in card and url in card
    result = run_result(s, T0)
    assert (result.pushed_commit, result.pull_request_url) == (PUSHED, url)
    assert result.outputs is not None and result.outputs.values["commit"] == PUSHED
    s.notifications_sent = 1
    told = notification(s, "finished", "finished after 1 attempt(s)", T0)
    assert told.reason == (
        f"finished after 1 attempt(s); added it; commit: {PUSHED}; branch: agent/x; "
        f"pull request: {url}"
    )
    assert (told.pushed_commit, told.pull_request_url) == (PUSHED, url)
    # Another event carries neither.
    needs = notification(s, "needs_attention", "why", T0)
    assert (needs.pushed_commit, needs.pull_request_url, needs.outputs) == (None, None, None)


def test_an_extension_of_a_run_whose_delivery_waits_tries_it_again_whatever_the_budget() -> None:
    s = state(delivery_waits="push", sandbox_id="box-1", paused_in_place=True)
    s.budget = s.budget.model_copy(update={"max_hours": 0.001})  # spent
    later = T0 + timedelta(hours=2)
    assert delivery.waiting(s) and decide_resume(s, later) == DeliverAgain()
    s.delivery.delivery_waits = "pull_request"
    assert decide_resume(s, later) == DeliverAgain()
    # Nothing waits: a sandbox paused in place is woken as before.
    s.delivery.delivery_waits = None
    s.budget = s.budget.model_copy(update={"max_hours": 24})
    assert decide_resume(s, T0) == WakeInPlace()
    # No sandbox to deliver from: not waiting (the run goes on as before).
    assert not delivery.waiting(state(delivery_waits="push"))


def test_only_a_push_not_made_keeps_the_work_only_in_the_sandbox() -> None:
    assert delivery.work_only_in_sandbox(state(finish_pushes=True, delivery_waits="push"))
    assert not delivery.work_only_in_sandbox(
        state(finish_pushes=True, delivery_waits="pull_request")
    )
    assert not delivery.work_only_in_sandbox(state(finish_pushes=True))
    assert not delivery.work_only_in_sandbox(state(finish_pushes=False, delivery_waits="push"))


def test_a_pull_request_is_wanted_once_when_the_spec_asks() -> None:
    assert not delivery.wants_pull_request(state())
    asked = state(spec={"pull_request": {}})
    assert delivery.wants_pull_request(asked)
    asked.delivery.pull_request_url = "https://github.com/octo/app/pull/1"
    assert not delivery.wants_pull_request(asked)


def test_reasons_keep_the_activitys_words_and_say_what_else_failed() -> None:
    refused = "the origin refused the push: remote: rejected"
    assert delivery.push_reason(refused) == refused
    assert delivery.push_reason("the run's work could not be committed: x").startswith("the run")
    assert delivery.push_reason("activity timed out") == (
        "the run's work is not on the origin: activity timed out"
    )
    said = "the pull request could not be opened: HTTP 403"
    assert delivery.pull_request_reason(said) == said
    assert delivery.pull_request_reason("timed out") == (
        "the pull request could not be opened: timed out"
    )


def test_the_pull_requests_facts_are_the_runs_without_output_tails() -> None:
    record = RestartRecord(attempt=1, reason="agent crashed (exit 1)", at=T0, output_tail="x" * 99)
    kept = [
        KeptWorkspace(number=1, outcome="pushed", at=T0, commit=PUSHED, attempt=1),
        KeptWorkspace(number=2, outcome="failed", at=T0, detail="refused", attempt=1),
    ]
    s = state(
        spec={"pull_request": {"title": "Add due dates"}},
        outputs=FINISHED,
        restarts=[record],
        attempt=2,
        fresh_starts_used=1,
        workspace_kept=kept,
    )
    facts = delivery.run_facts(s, T0 + timedelta(hours=1))
    assert (facts.run_id, facts.summary, facts.title) == (
        "pure-delivery",
        "added it",
        "Add due dates",
    )
    assert (facts.attempts, facts.fresh_starts) == (2, 1)
    assert [(r.reason, r.output_tail) for r in facts.restarts] == [("agent crashed (exit 1)", None)]
    assert [k.number for k in facts.kept] == [1]
    assert facts.hours_used == pytest.approx(1.0)
    assert state().kit.outputs is None and delivery.run_facts(state(), T0).summary == ""


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("base", "a..b", "not a valid git branch name"),
        ("base", "-x", "not a valid git branch name"),
        ("title", "two\nlines", "one line"),
        ("labels", ["a,b"], "no comma"),
        ("labels", ["x" * 51], "no comma"),
        ("until_checks_pass", "yes", "valid boolean"),
        ("draft", "yes", "valid boolean"),
    ],
)
def test_a_pull_request_spec_is_held_where_it_is_written(field: str, value: Any, said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        spec(pull_request={field: value})


def test_a_pull_request_needs_a_repository_url_not_a_folder() -> None:
    with pytest.raises(ValidationError, match="GitHub repository's URL"):
        spec(repo="/srv/origin.git", pull_request={})
    assert spec(repo="git@github.com:octo/app.git", pull_request={}).pull_request is not None
    made = spec(pull_request={"labels": ["overnight"]}).pull_request
    assert made is not None
    assert (made.base, made.draft, made.title, made.labels) == ("main", True, "", ["overnight"])
