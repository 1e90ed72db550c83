"""The rows of `bench.coding_agents` (group `codingagents`): per CLI, the median and max over
the crashes of the model turns redone, the time back to work and the spend lost, overnight's
way against the naive loop, with the notes that say how each was measured. Apart from the
runs: the rows are judged from samples alone (the smoke test feeds them made-up ones)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.coding_agents_samples import Sample
from bench.coding_agents_task import LIST_PRICES
from bench.report import Row

GROUP = "codingagents"
REDONE_AT_MOST = 1
BACK_AT_MOST = 2.0  # seconds, locally


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def _stat(samples: Sequence[Sample], name: str, stat: str) -> float:
    values = [float(getattr(sample, name)) for sample in samples]
    return _median(values) if stat == "median" else round(max(values), 4)


def result_rows(samples: Sequence[Sample]) -> list[Row]:
    rows: list[Row] = []
    for kind in dict.fromkeys(s.kind for s in samples):
        ours = [s for s in samples if s.kind == kind and s.way == "overnight"]
        naive = [s for s in samples if s.kind == kind and s.way == "naive"]
        if ours and naive:
            rows += _kind_rows(kind, ours, naive)
    for row in rows:
        row.group = GROUP
    return rows


def _kind_rows(kind: str, ours: list[Sample], naive: list[Sample]) -> list[Row]:
    calls = ours[0].calls
    crashes = ", ".join(str(s.crash_at) for s in ours)
    how = {
        "adapter": "overnight's adapter (overnight/agent_kit/coding_agent.py) resumed the same "
        "session",
        "cli": "the bench resumed the same session with the CLI's own resume, as the adapter "
        "does (the adapter was not used)",
    }[ours[0].resume_by]
    naive_how = "`claude -p TASK`" if kind == "claude-code" else "`codex exec TASK`"
    said = (
        f"{len(ours)} crashes (SIGKILL during tool call k = {crashes} of {calls}, once the "
        f"session file records it); {how}; baseline: {naive_how} run again from scratch. The "
        "fake model asks for each call whose result the conversation lacks: the resumed "
        "session's first request carries call k's interrupted result, so call k is asked for "
        "again (1 turn); the baseline's fresh session, calls 1..k"
    )
    unfinished = [f"{s.way} k={s.crash_at}" for s in ours + naive if not s.finished]
    if unfinished:
        said += f"; NOT finished: {', '.join(unfinished)}"
    back = (
        "SIGKILL of the CLI to the first model request of the next CLI (overnight: the resumed "
        "session's; baseline: the fresh run's)"
    )
    stages = [s.stages for s in ours if "cli_ended" in s.stages and "cli_started" in s.stages]
    if stages:
        ended = _median([st["cli_ended"] for st in stages])
        begun = _median([st["cli_started"] for st in stages])
        back += (
            f"; medians: the adapter done with the dead CLI {ended:.2f} s after the kill "
            f"(leftovers ended, session stored, checkpoint saved), resume begun {begun:.2f} s, "
            "the rest is the CLI's own start"
        )
    name, per_in, per_out = LIST_PRICES[kind]
    clean = _median([s.clean_usd for s in ours])
    spent = (
        f"the redone requests' tokens at {name}'s list price (${per_in:g} in, ${per_out:g} out "
        f"per M tokens), input tokens = request bytes / 4, no prompt caching; a clean run of "
        f"{calls} calls costs about ${clean:.3f}"
    )
    rows = []
    for stat in ("median", "max"):
        rows.append(
            Row(
                f"{kind}: model turns redone per crash, {stat}",
                "turns",
                _stat(naive, "redone", stat),
                _stat(ours, "redone", stat),
                target=f"<= {REDONE_AT_MOST}",
                at_most=REDONE_AT_MOST,
                note=said,
            )
        )
    for stat in ("median", "max"):
        rows.append(
            Row(
                f"{kind}: crash -> the CLI's next model request, {stat}",
                "s",
                _stat(naive, "back_seconds", stat),
                _stat(ours, "back_seconds", stat),
                target=f"<= {BACK_AT_MOST:g} s",
                at_most=BACK_AT_MOST,
                note=back,
            )
        )
    rows.append(
        Row(
            f"{kind}: crash -> asking again for the killed call, median",
            "s",
            _stat(naive, "caught_up_seconds", "median"),
            _stat(ours, "caught_up_seconds", "median"),
            note="SIGKILL to the model request answered with call k again, where the CLI was "
            "(the baseline redoes calls 1..k-1 first); the fake answers at once, so each "
            "redone turn here costs a real model's latency more",
        )
    )
    for stat in ("median", "max"):
        rows.append(
            Row(
                f"{kind}: spend lost per crash, {stat}",
                "USD",
                _stat(naive, "lost_usd", stat),
                _stat(ours, "lost_usd", stat),
                note=spent,
            )
        )
    return rows
