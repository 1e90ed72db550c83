"""The workspace kept at each checkpoint, decided without a server: one keep per change, what
a keep leaves (bounded), what a new sandbox starts from, what a create's answer changes."""

from __future__ import annotations

from datetime import UTC, datetime

from activities.models import AgentStarted, CheckpointRead
from activities.models.workspace import WorkspaceKeep, WorkspaceRestored
from overnight.core.workspace_spec import MAX_KEPT_RECORDS, KeptWorkspace
from tests.workflows.harness import make_spec
from workflows.pure import workspace
from workflows.pure.state import SupervisorState

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def state(**fields: object) -> SupervisorState:
    spec = make_spec(keep_workspace=True)
    s = SupervisorState(spec=spec, budget=spec.budget, started_at=NOW, **fields)  # type: ignore[arg-type]
    s.workspace.workspace_keeping, s.sandbox_id, s.progress.checkpoint_digest = True, "box-1", "d1"
    return s


def pushed(number: int) -> WorkspaceKeep:
    return WorkspaceKeep(
        outcome="pushed", ref=f"refs/overnight/r/{number}", commit=f"{number:040x}"
    )


def test_one_keep_per_checkpoint_change() -> None:
    s = state()
    assert workspace.due(s)
    assert workspace.number_next(s) == 1
    assert not workspace.due(s)  # taken for this checkpoint, whatever its outcome
    s.progress.checkpoint_digest = "d2"
    assert workspace.due(s) and workspace.number_next(s) == 2
    s.sandbox_id = None
    s.progress.checkpoint_digest = "d3"
    assert not workspace.due(s)


def test_records_are_bounded_and_a_problem_is_said_until_the_next() -> None:
    s = state()
    for number in range(1, MAX_KEPT_RECORDS + 6):
        workspace.record(s, number, pushed(number), NOW)
    assert (
        len(s.workspace.workspace_kept) == MAX_KEPT_RECORDS
        and s.workspace.workspace_kept[0].number == 6
    )
    over = WorkspaceKeep(outcome="over_limit", bytes=5, detail="too big")
    workspace.record(s, 999, over, NOW)
    assert s.workspace.workspace_problem == "checkpoint 999: too big"
    workspace.record(s, 1000, pushed(1000), NOW)
    assert s.workspace.workspace_problem == "checkpoint 999: too big"
    assert workspace.previous_commit(s) == f"{1000:040x}"


def test_a_new_sandbox_starts_from_the_latest_pushed_or_the_rewinds_target() -> None:
    s = state()
    assert workspace.restore_for(s) is None
    workspace.record(s, 1, pushed(1), NOW)
    workspace.record(s, 2, WorkspaceKeep(outcome="failed"), NOW)
    restore = workspace.restore_for(s)
    assert restore is not None and restore.commit == f"{1:040x}" and not restore.rewind
    s.workspace.rewinding = KeptWorkspace(
        number=1, outcome="pushed", at=NOW, ref="refs/overnight/r/1", commit="c" * 40
    )
    restore = workspace.restore_for(s)
    assert restore is not None and restore.rewind and restore.commit == "c" * 40
    s.workspace.workspace_keeping = False
    assert workspace.restore_for(s) is None


def test_a_rewinds_create_takes_its_checkpoint_as_not_news() -> None:
    s = state()
    s.workspace.rewinding = KeptWorkspace(
        number=2, outcome="pushed", at=NOW, ref="x", commit="c" * 40
    )
    text = '{"next": "step 3"}'
    started = AgentStarted(
        sandbox_id="box-2",
        process_id="p",
        workspace_base="b" * 40,
        workspace_restored=WorkspaceRestored(status="restored", checkpoint_written=True),
        checkpoint_restored=CheckpointRead(status="ok", digest="d-two", size=len(text), text=text),
    )
    workspace.take_started(s, started, NOW)
    assert (s.progress.checkpoint, s.progress.checkpoint_digest, s.workspace.workspace_digest) == (
        text,
        "d-two",
        "d-two",
    )
    assert (
        s.workspace.rewinding is None
        and s.workspace.rewinds == 1
        and s.workspace.workspace_base == "b" * 40
    )


def test_a_restore_that_could_not_be_made_is_said() -> None:
    s = state()
    skipped = WorkspaceRestored(status="skipped", detail="the branch has moved past it")
    started = AgentStarted(sandbox_id="box-2", process_id="p", workspace_restored=skipped)
    s.attempt = 2
    workspace.take_started(s, started, NOW)
    assert s.workspace.workspace_problem == (
        "sandbox 2 started without the kept workspace: the branch has moved past it"
    )


def test_a_keep_is_recorded_with_what_it_kept_its_attempt_and_a_short_detail() -> None:
    s = state()
    s.attempt = 3
    kept = WorkspaceKeep(
        outcome="pushed",
        ref="refs/overnight/r/4",
        commit="c" * 40,
        bytes=1234,
        has_checkpoint=True,
        detail="d" * 400,
    )
    entry = workspace.record(s, 4, kept, NOW)
    assert (entry.number, entry.outcome, entry.at, entry.attempt) == (4, "pushed", NOW, 3)
    assert (entry.ref, entry.commit, entry.bytes, entry.has_checkpoint) == (
        "refs/overnight/r/4",
        "c" * 40,
        1234,
        True,
    )
    assert entry.detail == "d" * 300 and s.workspace.workspace_kept == [entry]


def test_a_skipped_keep_is_no_problem_and_a_failed_one_without_detail_says_its_outcome() -> None:
    s = state()
    workspace.record(s, 1, WorkspaceKeep(outcome="skipped", detail="nothing changed"), NOW)
    assert s.workspace.workspace_problem is None
    workspace.record(s, 2, WorkspaceKeep(outcome="failed"), NOW)
    assert s.workspace.workspace_problem == "checkpoint 2: failed"


def test_with_nothing_pushed_there_is_no_previous_commit_and_nothing_to_start_from() -> None:
    s = state()
    workspace.record(s, 1, WorkspaceKeep(outcome="failed", detail="push refused"), NOW)
    assert workspace.previous_commit(s) is None and workspace.restore_for(s) is None
    # A record that says pushed but names no commit is nothing to start from either.
    s.workspace.workspace_kept = [
        KeptWorkspace(number=2, outcome="pushed", at=NOW, ref="refs/overnight/r/2")
    ]
    assert workspace.restore_for(s) is None


def test_the_runs_base_is_its_first_sandboxs() -> None:
    s = state()
    workspace.take_started(s, AgentStarted(sandbox_id="b1", process_id="p"), NOW)
    assert s.workspace.workspace_base is None
    first = AgentStarted(sandbox_id="b2", process_id="p", workspace_base="a" * 40)
    workspace.take_started(s, first, NOW)
    later_one = AgentStarted(sandbox_id="b3", process_id="p", workspace_base="b" * 40)
    workspace.take_started(s, later_one, NOW)
    assert s.workspace.workspace_base == "a" * 40


def test_a_rewind_that_could_not_be_made_says_which_checkpoint() -> None:
    s = state()
    s.workspace.rewinding = KeptWorkspace(
        number=2, outcome="pushed", at=NOW, ref="x", commit="c" * 40
    )
    failed = WorkspaceRestored(status="failed", detail="the ref is gone")
    workspace.take_started(
        s, AgentStarted(sandbox_id="box-2", process_id="p", workspace_restored=failed), NOW
    )
    assert s.workspace.workspace_problem == (
        "rewind to checkpoint 2 started without the kept workspace: the ref is gone"
    )
    assert s.workspace.rewinding is None and s.workspace.rewinds == 0


def test_rewinds_are_counted_and_the_rewound_checkpoint_is_progress_now() -> None:
    s = state()
    later = datetime(2026, 12, 2, 1, tzinfo=UTC)
    for n, digest in ((1, "d-one"), (2, "d-two")):
        s.workspace.rewinding = KeptWorkspace(
            number=n, outcome="pushed", at=NOW, ref="x", commit="c" * 40
        )
        text = f'{{"next": "step {n}"}}'
        started = AgentStarted(
            sandbox_id=f"box-{n}",
            process_id="p",
            workspace_restored=WorkspaceRestored(status="restored", checkpoint_written=True),
            checkpoint_restored=CheckpointRead(
                status="ok", digest=digest, size=len(text), text=text
            ),
        )
        workspace.take_started(s, started, later)
    assert s.workspace.rewinds == 2 and s.progress.last_progress_at == later


def test_the_status_shows_the_base_the_keeps_the_problem_and_the_rewinds() -> None:
    s = state(workspace_base="b" * 40, workspace_problem="checkpoint 3: failed", rewinds=2)
    workspace.record(s, 4, pushed(4), NOW)
    view = workspace.view(s)
    assert view is not None
    assert (view.base, view.kept, view.problem, view.rewinds) == (
        "b" * 40,
        s.workspace.workspace_kept,
        "checkpoint 3: failed",
        2,
    )
    s.workspace.workspace_keeping = False
    assert workspace.view(s) is None
