"""Every kind in `AGENT_CLIS` has its test facts here, and none other: a new row without its
module in tests/kinds/ (or a module without its row) fails."""

from __future__ import annotations

from overnight.core.agent_kinds import AGENT_CLIS
from tests.kinds import KIND_FACTS


def test_the_kinds_with_test_facts_are_agent_clis_kinds() -> None:
    assert sorted(KIND_FACTS) == sorted(AGENT_CLIS)
