"""A cancelled run says why: `overnight status` and the card show the cancel's reason (a
person's words, escaped as agent text is); `logs --follow`'s end line says it too
(tests/cli/test_logs_follow_says_the_run.py)."""

from __future__ import annotations

from overnight.cli.render import status_text
from tests.workflows.pure.test_decide import T0, running
from workflows.pure.card import build_status, render_card


def test_a_cancelled_runs_status_and_card_say_the_reason_escaped() -> None:
    run = running(
        state="cancelled",
        cancel_requested=True,
        cancel_reason="seen *enough*\n \x1b[2J",
    )
    status = build_status(run, T0)
    assert status.cancel_reason == "seen *enough*\n \x1b[2J"
    text = status_text(status, now=T0, ui_url=None)
    assert "  cancelled:     seen *enough* \\x1b[2J" in text.splitlines(), text
    assert "- **cancelled** seen \\*enough\\*" in render_card(status, T0)


def test_a_run_not_cancelled_says_no_cancel() -> None:
    status = build_status(running(), T0)
    assert status.cancel_reason is None
    assert "cancelled" not in status_text(status, now=T0, ui_url=None)
