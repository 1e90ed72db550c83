"""A run held by a used-up budget says what lifts it: the needs-you line of `overnight status`,
the card (and `logs --follow`: tests/cli/test_logs_follow_says_the_run.py) names the
`overnight extend` command, as the question line names `overnight answer`."""

from __future__ import annotations

import pytest

from overnight.cli.render import status_text
from tests.workflows.pure.test_decide import T0, running
from workflows.pure.card import build_status, render_card


@pytest.mark.parametrize(
    ("reason", "option"),
    [
        ("restart budget used up (1 of 1)", "--restarts N"),
        ("hours budget used up (8.01 of 8 h)", "--hours H"),
        ("spend budget used up ($5.01 of $5.00)", "--spend USD"),
        ("wait budget used up (2.00 of 2 h paused for questions and waits)", "--wait-hours H"),
        (
            "done checks used up (3 failed rounds of 3 allowed): last, `make test`",
            "--done-checks N",
        ),
        ("CI checks still failing after 3 rounds of 3 allowed", "--ci-rounds N"),
    ],
)
def test_the_needs_you_line_names_the_command_that_lifts_a_used_up_budget(
    reason: str, option: str
) -> None:
    run = running(state="needs_attention", attention_reason=reason)
    status = build_status(run, T0)
    run_id = status.run_id
    told = f"{reason}; overnight extend {run_id} {option}"
    assert f"  needs you:     {told}" in status_text(status, now=T0, ui_url=None).splitlines()
    assert f"overnight extend {run_id} {option}" in render_card(status, T0)


def test_a_needs_you_line_no_budget_holds_names_no_extend() -> None:
    run = running(state="needs_attention", attention_reason="the agent's question waited 8 h")
    text = status_text(build_status(run, T0), now=T0, ui_url=None)
    assert "  needs you:     the agent's question waited 8 h" in text.splitlines()
    assert "overnight extend" not in text
