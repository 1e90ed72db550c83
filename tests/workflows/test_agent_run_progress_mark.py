"""A checkpoint that only says what the agent is doing is no progress (`progress_mark`,
workflows/pure/run_record.py; marker `checkpoint-progress-mark`): the coding-agent adapter
rewrites its checkpoint while its CLI retries a model API it cannot reach (new notes, a new
`next`), with the same mark, since no new work came. The run still takes those checkpoints
(their notes are its status), and restarts as stalled `stall_seconds` after the last new work,
where each rewrite used to hold the stall off for ever. A checkpoint with a new mark, and one
with none at all (any kit agent), is progress as before."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio.client import Client

from fakes.activities import FakeWorld, Quiet, checkpoint_ok, exits, progress
from tests.workflows.harness import eventually, keep_history, make_spec, started_run, status_of
from tests.workflows.pure.test_decide import T0, running
from workflows.pure.run_record import take_checkpoint


def adapter_checkpoint(step: int, next_step: str) -> str:
    """In the shape of the coding-agent adapter's: its mark says the work, `next` the rest."""
    mark = {"step": step, "head": f"head-{step}", "tokens": 1000 * step, "ended": None, "waits": 0}
    return json.dumps(
        {"step": step, "next": next_step, "notes": [next_step], "progress_mark": mark}
    )


async def test_checkpoints_rewritten_without_new_work_do_not_hold_the_stall_off(
    client: Client, world: FakeWorld
) -> None:
    retrying = [
        adapter_checkpoint(1, f"model API error: the CLI retries ({n}/10)") for n in range(1, 6)
    ]
    # Each quiet look waits a while: the rewrites come minutes apart, as the adapter's would.
    steps = [step for text in retrying for step in (Quiet(), progress(text))]
    world.script(1, [progress(adapter_checkpoint(1, "working")), *steps])
    world.script(2, [progress(adapter_checkpoint(2, "working")), exits(0)])
    async with started_run(client, world, make_spec(poll_seconds=60)) as handle:
        progressed = await eventually(lambda: status_of(handle), lambda s: s.checkpoint_bytes > 0)
        assert progressed.last_progress_at is not None
        result = await handle.result()
        status = await status_of(handle)
        await keep_history(handle, "progress_mark_stall")

    [record] = status.restarts
    assert record.reason == "agent stalled 15 min"
    stalled_for = (record.at - progressed.last_progress_at).total_seconds()
    assert 900 <= stalled_for < 901, stalled_for  # from the last new work, not a rewrite
    # The rewrites were taken all the same (their notes are the status): the new sandbox
    # starts from the last one taken.
    assert world.creates()[1].checkpoint in retrying
    assert (result.outcome, result.restarts) == ("finished", 1)


def test_a_new_mark_or_none_at_all_is_progress_and_the_rule_needs_its_marker() -> None:
    s = running()
    marker_asked: list[bool] = []

    def marker() -> bool:
        marker_asked.append(True)
        return True

    def take(text: str, at: datetime, by_mark: Callable[[], bool] | None = marker) -> None:
        taken, refused = take_checkpoint(s, checkpoint_ok(text), at, by_progress_mark=by_mark)
        assert (taken, refused) == (True, None)

    take(adapter_checkpoint(1, "working"), later(1))
    assert s.progress.last_progress_at == later(1)
    take(adapter_checkpoint(1, "the CLI retries (1/10)"), later(2))  # the same work
    assert s.progress.last_progress_at == later(1) and marker_asked == [True]
    assert (
        s.progress.checkpoint is not None and "retries (1/10)" in s.progress.checkpoint
    )  # taken all the same
    take(adapter_checkpoint(2, "working"), later(3))  # a new step
    assert s.progress.last_progress_at == later(3)
    take(json.dumps({"next": "a kit agent's note", "notes": []}), later(4))  # no mark
    assert s.progress.last_progress_at == later(4)
    take(json.dumps({"next": "another note", "notes": []}), later(5))
    assert s.progress.last_progress_at == later(5)
    # A history recorded before the marker (it answers False) counts every change as before.
    take(adapter_checkpoint(3, "working"), later(6))
    take(adapter_checkpoint(3, "the CLI retries (2/10)"), later(7), lambda: False)
    assert s.progress.last_progress_at == later(7)
    take(adapter_checkpoint(3, "the CLI retries (3/10)"), later(8), None)
    assert s.progress.last_progress_at == later(8)
    assert marker_asked == [True]  # asked only when the marks were the same


def later(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)
