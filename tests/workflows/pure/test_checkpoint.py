"""Which checkpoint may replace the last good one, pure: the byte cap, every refusal's verdict
and reason, and what the kept checkpoint is taken to say."""

from __future__ import annotations

import json

from activities.models import CheckpointRead
from fakes.activities import checkpoint_ok, checkpoint_too_large, note
from overnight.core.checkpoint_text import MAX_DEPTH, CheckpointFacts
from workflows.pure.checkpoint import Verdict, facts, judge, kept_facts


def test_the_checkpoint_cap_counts_bytes_not_characters() -> None:
    # 600 characters, 1200 bytes: over a 1000-byte cap; 500 of them (1000 bytes) are not.
    over = judge(checkpoint_ok("é" * 600), previous_was_json=False, max_bytes=1000)
    assert over == Verdict(False, reason="checkpoint is over the 1000-byte cap")
    at_cap = judge(checkpoint_ok("é" * 500), previous_was_json=False, max_bytes=1000)
    assert at_cap == Verdict(True, is_json=False)


def test_every_refusal_is_a_verdict_of_false_with_its_reason() -> None:
    cases = {
        "checkpoint is 5000 bytes, over the 1000 cap": checkpoint_too_large(5000),
        "checkpoint could not be read: it is a FIFO": CheckpointRead(
            status="unreadable", digest="refused:it is a FIFO", detail="it is a FIFO"
        ),
        "checkpoint path leads outside the sandbox": CheckpointRead(
            status="outside", digest="outside"
        ),
        "checkpoint stopped parsing as JSON (truncated or corrupt)": checkpoint_ok('{"next": "'),
    }
    for reason, read in cases.items():
        assert judge(read, previous_was_json=True, max_bytes=1000) == Verdict(False, reason=reason)


def test_an_unreadable_checkpoint_that_says_nothing_is_not_utf_8_text() -> None:
    read = CheckpointRead(status="unreadable", digest="abc", size=3)
    verdict = judge(read, previous_was_json=False, max_bytes=1000)
    assert verdict == Verdict(False, reason="checkpoint could not be read: not UTF-8 text")


def test_a_checkpoint_nested_too_deep_is_refused_saying_so() -> None:
    deep = checkpoint_ok("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    verdict = judge(deep, previous_was_json=False, max_bytes=1000)
    reason = f"checkpoint could not be read: it nests deeper than {MAX_DEPTH} levels"
    assert verdict == Verdict(False, reason=reason)


def test_a_read_that_is_not_ok_is_no_news_whatever_it_carries() -> None:
    text_but_missing = CheckpointRead(status="missing", text=note("step 9"))
    assert judge(text_but_missing, previous_was_json=False, max_bytes=1000) == Verdict(False)
    ok_without_text = CheckpointRead(status="ok", digest="abc")
    assert judge(ok_without_text, previous_was_json=False, max_bytes=1000) == Verdict(False)


def test_facts_sent_with_the_read_are_believed_over_its_text() -> None:
    sent = CheckpointFacts(is_json=False)
    read = CheckpointRead(status="ok", digest="abc", text=note("step 2"), facts=sent)
    assert facts(read) is sent
    assert facts(checkpoint_ok(note("step 2"))).is_json  # a read recorded before facts were sent


def test_the_kept_checkpoints_facts_are_those_taken_with_it_else_read_from_its_text() -> None:
    known = CheckpointFacts(is_json=False)
    assert kept_facts(note("step 2"), known) is known
    read_here = kept_facts(json.dumps({"next": "step 3", "snapshot_request": 2}), None)
    assert read_here.is_json and read_here.snapshot_request == 2
    assert read_here.summary is not None and read_here.summary.next == "step 3"
