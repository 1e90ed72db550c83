"""Money under a cent reads the same everywhere: `overnight status`, the card and the console
showed a cheap run's spend as `$0.00`, `$0.00` and `$0.0013`; now all `$0.0013` (one rule,
overnight.core.status_lines.usd)."""

from __future__ import annotations

from overnight.cli.render import status_text
from overnight.console.render import usd as console_usd
from overnight.core.models import Budget
from overnight.core.status_lines import usd
from tests.workflows.pure.test_decide import T0, running
from workflows.pure.card import build_status, render_card


def test_a_spend_under_a_cent_is_shown_alike_in_status_the_card_and_the_console() -> None:
    run = running(budget=Budget(max_spend_usd=5))
    status = build_status(run, T0).model_copy(update={"spend_usd": 0.0013})
    assert "(spent $0.0013)" in status_text(status, now=T0, ui_url=None)
    assert "**spend** $0.0013 of $5.00" in render_card(status, T0)
    assert console_usd(0.0013) == "$0.0013"


def test_the_one_rule_for_money() -> None:
    assert [usd(v) for v in (0, 0.0013, 0.00001, 0.01, 1234.5)] == [
        "$0.00",
        "$0.0013",
        "<$0.0001",
        "$0.01",
        "$1,234.50",
    ]
    assert console_usd(None) == "-"
