"""The run page's parts drawn from a run a hostile agent wrote into, without a server: every
word of the agent's is text (no tag, link or button of its own), its choices are the text of
the console's buttons and nothing more, and the pull request is linked only when it is an
https address."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from overnight.console.render import fragment
from overnight.console.run_data import RunData, safe_pull_request
from overnight.console.run_page import acts_context, facts_context
from overnight.core.agent_requests import AgentTalk, RunOutputs
from overnight.core.models import Budget, CheckpointSummary, RestartRecord, RunResult, RunStatus

SCRIPT = "<script>document.title='pwned'</script>"
LINK = "[Approve](https://evil.example/approve)"
FAKE_BUTTON = '<button name="answer" value="yes">Approve</button>'
HOSTILE = f"{SCRIPT} {LINK} {FAKE_BUTTON}"


def hostile_run(pr: str | None = None) -> RunData:
    now = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)
    status = RunStatus(
        run_id="r1",
        state="waiting_for_answer",
        attempt=2,
        budget=Budget(max_spend_usd=5),
        started_at=datetime(2026, 12, 6, 1, 0, tzinfo=UTC),
        checkpoint_summary=CheckpointSummary(next=HOSTILE, last_note=HOSTILE),
        talk=AgentTalk(question=HOSTILE, choices=["yes", FAKE_BUTTON], asked_at=now),
        restarts=[RestartRecord(attempt=1, reason=HOSTILE, at=now)],
        outputs=RunOutputs(summary=HOSTILE, values={"report": HOSTILE}),
        pull_request_url=pr,
    )
    return RunData("r1", True, "running", None, status)


def test_an_ended_run_whose_status_cannot_be_read_shows_its_outcome() -> None:
    """Seen under load: no worker replayed the ended run within the query's 5 s, and the page
    said `completed` (Temporal's word) where the run had `finished`."""
    result = RunResult(
        run_id="r1", outcome="finished", attempts=2, restarts=1, hours_used=0.1, spend_usd=0
    )
    ended = RunData("r1", False, "completed", None, None, status_problem="no worker answered")
    html = fragment("_run_facts.html", facts_context(ended))
    assert '<span class="state ended">completed</span>' in html  # no result: how it closed
    ended.result = result
    html = fragment("_run_facts.html", facts_context(ended))
    assert '<span class="state ended">finished</span>' in html
    assert "cannot be read now: no worker answered" in html


def test_agent_text_in_the_facts_is_text_and_makes_no_tag_or_link() -> None:
    html = fragment("_run_facts.html", facts_context(hostile_run()))
    assert "<script" not in html and "<button" not in html
    assert "evil.example" in html  # shown, as text
    assert not re.search(r"<a [^>]*evil\.example", html)
    assert "&lt;script&gt;" in html


def test_choices_are_only_the_text_of_the_consoles_buttons() -> None:
    context = {**acts_context(hostile_run(), may_act=True), "csrf_token": "t"}
    html = fragment("_run_acts.html", context)
    buttons = re.findall(r"<button[^>]*>(.*?)</button>", html, re.DOTALL)
    # The two choices, then the console's own: Extend and Cancel.
    assert buttons == [
        "yes",
        FAKE_BUTTON.replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;"),
        "Extend",
        "Cancel the run",
    ]
    assert "<script" not in html
    assert not re.search(r"<a [^>]*evil\.example", html)


def test_a_reader_sees_the_question_and_no_form() -> None:
    html = fragment(
        "_run_acts.html", {**acts_context(hostile_run(), may_act=False), "csrf_token": ""}
    )
    assert "<form" not in html and "<button" not in html
    assert "&lt;script&gt;" in html


def test_the_pull_request_is_linked_only_as_an_https_address() -> None:
    good = "https://github.com/acme/app/pull/7"
    html = fragment("_run_facts.html", facts_context(hostile_run(good)))
    assert f'href="{good}"' in html
    for bad in (
        "javascript:alert(1)",
        "http://github.com/acme/app/pull/7",
        "https://user:pw@github.com/x",
        "https://github.com/x y",
        "data:text/html,hi",
    ):
        assert safe_pull_request(bad) is None
        shown = fragment("_run_facts.html", facts_context(hostile_run(bad)))
        assert 'class="pull-request"' not in shown
