"""What a run records of what it sees (workflows/pure/run_record.py): a checkpoint taken or
refused, the kit's requests file, a new sandbox, an agent's last words, a restart, the result."""

from __future__ import annotations

import json
from typing import Any

from activities.models import (
    AgentStarted,
    CheckpointRead,
    DailyLimitRead,
    OutputTail,
    RequestsRead,
)
from fakes.activities import checkpoint_ok, checkpoint_too_large, note
from overnight.core.agent_requests import AgentRequests, ModelUsage, RunOutputs
from overnight.core.checkpoint_text import facts_of
from overnight.core.done_check import DoneCheck
from overnight.core.models import DailyLimit, LastWords, RestartRecord
from tests.workflows.pure.test_decide import T0, later, running, spec
from workflows.pure.run_record import (
    TAILS_KEPT,
    note_last_words,
    record_restart,
    run_result,
    sandbox_started,
    take_checkpoint,
    take_requests_file,
)
from workflows.pure.state import SupervisorState

# ---- last words and restarts -----------------------------------------------------------------


def test_the_last_words_of_the_agent_that_ended_are_kept_with_which_start_it_was() -> None:
    s = running(attempt=2, process_fresh_start=3)
    note_last_words(s, OutputTail(text="bye", truncated=True), "agent crashed (exit 1)", later())
    assert s.attempts.last_words == LastWords(
        attempt=2, fresh_start=3, reason="agent crashed (exit 1)", at=later(), tail="bye",
        truncated=True,
    )  # fmt: skip


def test_no_tail_read_keeps_the_last_words_known() -> None:
    known = LastWords(attempt=1, reason="finished", at=T0, tail="earlier")
    s = running(last_words=known)
    note_last_words(s, None, "agent crashed (exit 1)", later())
    assert s.attempts.last_words == known


def record(attempt: int, tail: str | None = None) -> RestartRecord:
    return RestartRecord(attempt=attempt, reason="agent crashed (exit 1)", at=T0, output_tail=tail)


def test_a_restart_carries_the_last_words_of_its_own_attempt_only() -> None:
    s = running(last_words=LastWords(attempt=2, reason="x", at=T0, tail="Traceback"))
    mine, other = record(2), record(3)
    record_restart(s, mine)
    record_restart(s, other)
    assert (mine.output_tail, other.output_tail) == ("Traceback", None)
    silent = record(1)
    record_restart(running(), silent)
    assert silent.output_tail is None


def test_only_the_newest_restarts_keep_their_tails() -> None:
    s = running(restarts=[record(n, f"tail {n}") for n in range(1, TAILS_KEPT + 3)])
    record_restart(s, s.attempts.restarts[-1])
    tails = [r.output_tail for r in s.attempts.restarts]
    assert tails == [None, None] + [f"tail {n}" for n in range(3, TAILS_KEPT + 3)]


# ---- checkpoints -----------------------------------------------------------------------------


def test_a_good_checkpoint_is_taken_as_progress() -> None:
    s = running(checkpoint_rejected="the last one was too large")
    read = checkpoint_ok(note("write the parser", "read the spec"))
    assert take_checkpoint(s, read, later(minutes=5)) == (True, None)
    assert (s.progress.checkpoint, s.progress.checkpoint_digest, s.progress.seen_digest) == (
        read.text,
        read.digest,
        read.digest,
    )
    assert s.progress.checkpoint_is_json and s.progress.checkpoint_facts == facts_of(read.text)
    assert s.progress.checkpoint_rejected is None and s.progress.last_progress_at == later(
        minutes=5
    )


def test_nothing_read_or_nothing_new_changes_nothing() -> None:
    s = running(seen_digest="old")
    before = s.model_copy(deep=True)
    assert take_checkpoint(s, None, later()) == (False, None)
    unchanged = CheckpointRead(status="unchanged", digest="new")
    assert take_checkpoint(s, unchanged, later()) == (False, None)
    assert s == before


def test_a_refused_checkpoint_keeps_the_last_good_one_and_says_why_once_seen() -> None:
    good = checkpoint_ok(note("step 1"))
    s = running(spec=spec(max_checkpoint_bytes=1000))
    take_checkpoint(s, good, later())
    taken, why = take_checkpoint(s, checkpoint_too_large(5000), later(minutes=5))
    assert (taken, why) == (False, "checkpoint is 5000 bytes, over the 1000 cap")
    assert s.progress.checkpoint_rejected == why and s.progress.seen_digest == "too_large:5000"
    assert (s.progress.checkpoint, s.progress.last_progress_at) == (good.text, later())


def test_the_run_holds_its_checkpoints_to_its_own_cap_and_shape() -> None:
    s = running(spec=spec(max_checkpoint_bytes=50))
    taken, why = take_checkpoint(s, checkpoint_ok("x" * 51), later())
    assert (taken, why) == (False, "checkpoint is over the 50-byte cap")
    take_checkpoint(s, checkpoint_ok(note("a")), later())
    taken, why = take_checkpoint(s, checkpoint_ok("not json"), later())
    assert not taken and why is not None and "JSON" in why  # JSON once, JSON from then on


def test_a_read_that_says_nothing_leaves_the_last_refusal_standing() -> None:
    s = running(checkpoint_rejected="too large")
    not_read = CheckpointRead(status="unreadable")  # no digest: the sandbox was not read
    assert take_checkpoint(s, not_read, later()) == (False, None)
    assert s.progress.checkpoint_rejected == "too large" and s.progress.seen_digest is None


def test_a_checkpoint_taken_reports_the_agents_spend_and_results() -> None:
    s = running(agent_requests=True)
    said = {"overnight": {"usage": {"stream": "a", "usd": 1.5}, "finish": {"summary": "done"}}}
    take_checkpoint(s, checkpoint_ok(json.dumps(said)), later())
    assert s.money.model_usage["a"].usd == 1.5 and s.kit.outputs == RunOutputs(summary="done")


# ---- the kit's requests file -----------------------------------------------------------------


def usage(usd: float) -> AgentRequests:
    return AgentRequests(usage=ModelUsage(stream="a", usd=usd))


def file_run(**overrides: Any) -> SupervisorState:
    return running(agent_requests=True, requests_file=True, **overrides)


def test_a_new_requests_file_is_taken_and_its_spend_counted() -> None:
    s = file_run()
    read = RequestsRead(status="ok", digest="d1", requests=usage(2.0))
    assert take_requests_file(s, read) is True
    assert (s.kit.requests_digest, s.kit.file_requests) == ("d1", usage(2.0))
    assert s.money.model_usage["a"].usd == 2.0 and s.kit.request_refused is None


def test_a_requests_file_gone_asks_nothing_any_more() -> None:
    s = file_run(file_requests=usage(2.0))
    assert take_requests_file(s, RequestsRead(status="missing", digest=None)) is True
    assert s.kit.file_requests is None


def test_a_requests_file_refused_whole_keeps_what_the_last_good_one_asked() -> None:
    s = file_run(file_requests=usage(2.0))
    read = RequestsRead(status="too_large", digest="d2", refused="requests file over 512 KiB")
    assert take_requests_file(s, read) is True
    assert (s.kit.file_requests, s.kit.requests_digest) == (usage(2.0), "d2")
    assert s.kit.request_refused == "requests file over 512 KiB"


def test_no_news_from_the_requests_file_or_a_run_that_does_not_read_it() -> None:
    read = RequestsRead(status="ok", digest="d1", requests=usage(2.0))
    old = running(agent_requests=True)
    assert take_requests_file(old, read) is False and old.kit.file_requests is None
    s = file_run(requests_digest="d0")
    assert take_requests_file(s, None) is False
    assert take_requests_file(s, RequestsRead(status="unchanged", digest="d1")) is False
    assert s.kit.requests_digest == "d0"


# ---- a new sandbox ---------------------------------------------------------------------------


def test_a_new_sandbox_starts_afresh_with_the_last_good_checkpoint() -> None:
    s = running(
        state="restarting",
        process_fresh_start=3,
        sandbox_spent_before_usd=0.4,
        watch_token="watch-7",
        sandbox_paused=True,
        checkpoint_digest="good",
        seen_digest="refused",
        file_requests=usage(1.0),
        requests_digest="d9",
        safety_net_kept=True,
        net_noticed_at=later(minutes=1),
    )
    started = AgentStarted(
        sandbox_id="box-2",
        process_id="agent-2-0",
        lease_ends_at=later(hours=1),
        isolation="bubblewrap",
        restored_from="snap-1",
        daily=DailyLimitRead(
            limit_micros=5_000_000, used_micros=1_000_000, remaining_micros=4_000_000
        ),
    )
    sandbox_started(s, started, later(minutes=2))
    assert (s.sandbox_id, s.process_id, s.attempts.process_fresh_start) == ("box-2", "agent-2-0", 0)
    assert (
        s.sandbox.sandbox_started_at
        == s.progress.last_progress_at
        == s.sandbox.lease_extended_at
        == later(minutes=2)
    )
    assert (s.money.sandbox_spent_before_usd, s.sandbox.lease_ends_at) == (0, later(hours=1))
    assert (s.sandbox.watch_token, s.sandbox.sandbox_paused) == (None, False)
    assert (s.sandbox.isolation, s.snapshot.restored_from) == ("bubblewrap", "snap-1")
    assert s.progress.seen_digest == "good"  # the new sandbox holds it: not news
    assert (s.kit.file_requests, s.kit.requests_digest) == (None, None)
    assert s.state == "running"
    assert s.money.daily_limit is not None and s.money.daily_limit.remaining_usd == 4.0
    assert (
        s.net.net_totals.restarts == 1 and s.net.net_noticed_at is None
    )  # the restart's cost closed


def test_a_sandbox_started_without_a_daily_read_keeps_the_last_one() -> None:
    known = DailyLimit(limit_usd=5, used_usd=1, remaining_usd=4, read_at=T0)
    s = running(daily_limit=known)
    sandbox_started(s, AgentStarted(sandbox_id="box-2", process_id="p"), later())
    assert s.money.daily_limit == known


# ---- the result ------------------------------------------------------------------------------


def test_the_result_says_how_the_run_ended_and_what_it_cost() -> None:
    checks = [DoneCheck(command="pytest", index=0, round=1, passed=True, exit_code=0, at=T0)]
    s = running(
        state="finished",
        attempt=3,
        restarts_used=2,
        checkpoint=note("done"),
        checkpoint_is_json=True,
        outputs=RunOutputs(summary="ok"),
        model_usage={"a": ModelUsage(stream="a", usd=1 / 7)},
        done_results=checks,
        done_checks_used=1,
        egress_refused={"box-1": {"evil.example": 2}, "box-2": {"evil.example": 1, "a.b": 5}},
    )
    result = run_result(s, later(minutes=20))
    assert (result.run_id, result.outcome, result.checkpoint) == ("pure", "finished", note("done"))
    assert result.checkpoint_json == {"next": "done", "notes": []}
    assert (result.attempts, result.restarts, result.outputs) == (3, 2, RunOutputs(summary="ok"))
    assert (result.hours_used, result.spend_model_usd) == (0.3333, 0.1429)
    assert result.spend_usd == 0.1695  # 20 minutes at $0.08 an hour, and the model's 1/7
    assert result.done_checks == checks and result.done_checks_used == 1
    assert result.egress_refused == {"a.b": 5, "evil.example": 3}
    assert result.safety_net is None  # begun before it was kept


def test_a_run_that_did_not_finish_ends_cancelled_with_its_safety_net() -> None:
    s = running(state="cancelled", checkpoint="plain", safety_net_kept=True)
    result = run_result(s, later(hours=1))
    assert (result.outcome, result.checkpoint_json) == ("cancelled", None)
    assert result.safety_net is not None and result.safety_net.sandbox_usd == 0.08
