"""What the run's network refused: the counts each sandbox's provider reported (the local
gateway's book, Runtime's network rules), kept per sandbox so that each new sandbox counts
afresh and the run's figure is their sum."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from workflows.pure.state import SupervisorState


def take_refusals(
    state: SupervisorState, sandbox_id: str | None, counts: Mapping[str, int] | None
) -> None:
    """Keep what the provider said of `sandbox_id` (its counts only grow: a smaller report, as
    from a worker that lost its book, keeps the larger figure)."""
    if sandbox_id is None or not counts:
        return
    kept = state.sandbox.egress_refused.setdefault(sandbox_id, {})
    for host, count in counts.items():
        if count > kept.get(host, 0):
            kept[host] = count


def refused_totals(state: SupervisorState) -> dict[str, int]:
    """Refused connections of the whole run, per host asked for, most first."""
    total: Counter[str] = Counter()
    for counts in state.sandbox.egress_refused.values():
        total.update(counts)
    return dict(sorted(total.items(), key=lambda item: (-item[1], item[0])))
