"""Which paused Runtime sandboxes `logs` and `inspect` may wake for a read: never the one the
run itself is using, which it is about to wake (a wake and re-pause then would cost it a
restart)."""

from __future__ import annotations

from datetime import UTC, datetime

from activities.models import SandboxInfo
from overnight.cli.run_view import RunView
from overnight.core.models import Budget, RunSpec, RunState, RunStatus

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def view(*, open_: bool, state: RunState | None, current: str | None) -> RunView:
    spec = RunSpec(run_id="r", repo="file:///x", agent_dir="/a", command="c", provider="runtime")
    status = None
    if state is not None:
        status = RunStatus(
            run_id="r", state=state, attempt=2, sandbox_id=current, budget=Budget(), started_at=NOW
        )
    boxes = {n: SandboxInfo(sandbox_id=f"r-{n}", state="paused") for n in (1, 2)}
    return RunView(run_id="r", spec=spec, open=open_, status=status, sandboxes=boxes)


def test_the_sandbox_a_running_run_uses_is_never_woken_for_a_read() -> None:
    running = view(open_=True, state="running", current="r-2")
    assert not running.may_wake(running.sandboxes[2])
    assert running.may_wake(running.sandboxes[1])


def test_the_sandbox_paused_for_a_question_is_left_for_the_answer_to_wake() -> None:
    asking = view(open_=True, state="waiting_for_answer", current="r-2")
    assert not asking.may_wake(asking.sandboxes[2])
    assert asking.may_wake(asking.sandboxes[1])


def test_sandboxes_set_aside_or_of_an_ended_run_may_be_woken() -> None:
    waiting = view(open_=True, state="needs_attention", current="r-2")
    assert waiting.may_wake(waiting.sandboxes[2])
    ended = view(open_=False, state="finished", current=None)
    assert ended.may_wake(ended.sandboxes[2])


def test_with_no_worker_answering_only_earlier_attempts_may_be_woken() -> None:
    unknown = view(open_=True, state=None, current=None)
    assert not unknown.may_wake(unknown.sandboxes[2])
    assert unknown.may_wake(unknown.sandboxes[1])
