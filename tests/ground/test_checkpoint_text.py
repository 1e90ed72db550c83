"""Reading what an agent's checkpoint says never raises and never recurses into it: JSON
deeper than the limit is refused after a linear scan, anything else that does not parse is
"not JSON", and text taken from it can always be carried in a payload."""

from __future__ import annotations

import json
import time

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from overnight.core.checkpoint_text import (
    MAX_DEPTH,
    MAX_PARSED_BYTES,
    SUMMARY_CHARS,
    CheckpointFacts,
    facts_of,
    parse,
    parsed_for_result,
    too_deep,
)
from overnight.core.models import CheckpointSummary, RunResult

BOMB = "[" * 100_000 + "]" * 100_000


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def test_json_nested_up_to_the_limit_is_read_and_one_deeper_is_refused() -> None:
    assert facts_of(nested(MAX_DEPTH)).is_json
    deeper = facts_of(nested(MAX_DEPTH + 1))
    assert not deeper.is_json
    assert deeper.refusal == f"it nests deeper than {MAX_DEPTH} levels"


def test_a_200_kb_bracket_bomb_is_refused_quickly_without_recursing() -> None:
    began = time.monotonic()
    facts = facts_of(BOMB)
    assert facts.refusal is not None and not facts.is_json
    assert parse(BOMB) == (False, None)
    # The refusal says it was not left to json.loads to recurse (a RecursionError reads as no
    # refusal). The bound says the scan is linear: about 0.1 s, where a quadratic one (10^10
    # steps here) takes hours; 10 s tells them apart under any load.
    assert time.monotonic() - began < 10


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps({"next": "[" * 1000, "notes": ["{" * 500 + '\\"' + "]" * 10]})
    facts = facts_of(text)
    assert facts.is_json and facts.refusal is None
    assert facts.summary is not None and facts.summary.next is not None
    assert len(facts.summary.next) == SUMMARY_CHARS


@pytest.mark.parametrize(
    "text",
    [
        "plain words",
        "[1, 2",
        '{"next": ',
        "1" * 5000,  # over Python's int digits limit: ValueError, not a crash
        '"\\ud800"',
        "[" * 64 + "x",
        "",
    ],
)
def test_text_that_does_not_parse_is_not_json_and_never_raises(text: str) -> None:
    facts = facts_of(text)
    assert facts.summary is None and facts.snapshot_request == 0


def test_a_lone_surrogate_in_the_summary_is_made_encodable() -> None:
    facts = facts_of('{"next": "\\ud800 go", "notes": ["a", "\\udfff"]}')
    assert facts.summary is not None
    assert (facts.summary.next, facts.summary.last_note) == ("? go", "?")
    facts.model_dump_json()  # a payload can carry it


@pytest.mark.parametrize(
    ("value", "wanted"),
    [(3, 3), (-1, 0), (True, 0), (2.5, 0), ("4", 0), (10**30, 0), (2**53, 2**53)],
)
def test_only_a_plausible_snapshot_request_counts(value: object, wanted: int) -> None:
    assert facts_of(json.dumps({"snapshot_request": value})).snapshot_request == wanted


def test_only_text_that_opens_an_array_or_object_can_be_too_deep() -> None:
    assert not too_deep('"' + "[" * 100 + '"')  # a string: json.loads never recurses
    assert not too_deep("hello " + "[" * 100)
    assert too_deep(" \n" + "[" * 100)
    assert too_deep(" \n" + "{" * 100)


@pytest.mark.parametrize("first", ["X", "x", "1", "n", "-"])
def test_plain_text_full_of_brackets_is_not_json_and_not_refused(first: str) -> None:
    facts = facts_of(first + "[" * 100)
    assert (facts.is_json, facts.refusal) == (False, None)


def test_json_exactly_as_deep_as_the_limit_is_read_however_many_brackets_it_has() -> None:
    # Two branches 63 deep inside a list: 64 deep, with 127 brackets opened.
    text = "[" + nested(MAX_DEPTH - 1) + ", " + nested(MAX_DEPTH - 1) + "]"
    assert not too_deep(text)
    facts = facts_of(text)
    assert facts.is_json and facts.refusal is None


def test_parse_gives_the_value_of_json_and_nothing_else() -> None:
    assert parse('{"next": "a"}') == (True, {"next": "a"})
    assert parse("[]") == (True, [])
    assert parse("not json") == (False, None)


def test_a_json_array_checkpoint_is_json_with_no_summary_and_no_request() -> None:
    facts = facts_of("[1, 2]")
    assert facts == CheckpointFacts(is_json=True)


def test_a_checkpoint_without_next_or_notes_says_neither() -> None:
    assert facts_of('{"notes": []}').summary == CheckpointSummary(next=None, last_note=None)


def test_a_next_step_that_is_not_text_is_shown_as_json() -> None:
    facts = facts_of(json.dumps({"next": {"step": 3}, "notes": [None, 7]}))
    assert facts.summary == CheckpointSummary(next='{"step": 3}', last_note="7")


def test_a_next_step_of_exactly_the_summary_length_is_kept_whole() -> None:
    facts = facts_of(json.dumps({"next": "n" * SUMMARY_CHARS}))
    assert facts.summary is not None and facts.summary.next == "n" * SUMMARY_CHARS


# ---- the parsed checkpoint beside the text in RunResult ------------------------------------


def test_a_json_checkpoint_is_parsed_for_the_result_and_round_trips_through_the_converter() -> None:
    text = json.dumps({"step": 5, "done": ["a", "b"], "next": "done"})
    value = parsed_for_result(text, True)
    assert value == json.loads(text)
    result = RunResult(
        run_id="r",
        outcome="finished",
        checkpoint=text,
        attempts=1,
        restarts=0,
        hours_used=0,
        spend_usd=0,
        checkpoint_json=value,
    )
    converter = pydantic_data_converter.payload_converter
    [payload] = converter.to_payloads([result])
    assert json.loads(payload.data)["checkpoint_json"]["done"] == ["a", "b"]
    [back] = converter.from_payloads([payload], [RunResult])
    assert back == result


def test_agent_bytes_in_a_checkpoint_never_break_the_result() -> None:
    # A lone surrogate escape, in a key and a value; NaN and an overflowing float.
    text = '{"\\ud800": "\\udfff x", "n": NaN, "big": 1e999, "ok": [1, 2.5, null, true]}'
    value = parsed_for_result(text, True)
    assert value == {"?": "? x", "n": None, "big": None, "ok": [1, 2.5, None, True]}
    json.dumps(value, allow_nan=False).encode("utf-8")  # serialisable as strict JSON


def test_text_and_oversized_checkpoints_have_no_parsed_value() -> None:
    assert parsed_for_result("step 3 of 5", False) is None
    assert parsed_for_result("not json {", True) is None
    assert parsed_for_result(None, True) is None
    big = json.dumps({"blob": "x" * MAX_PARSED_BYTES})
    assert parsed_for_result(big, True) is None
    deep = "[" * 200 + "]" * 200
    assert parsed_for_result(deep, True) is None


def test_a_checkpoint_of_exactly_the_parsed_bytes_is_parsed_and_one_byte_more_is_not() -> None:
    fill = MAX_PARSED_BYTES - len(json.dumps({"blob": ""}))
    exactly = json.dumps({"blob": "x" * fill})
    assert len(exactly.encode()) == MAX_PARSED_BYTES
    assert parsed_for_result(exactly, True) == {"blob": "x" * fill}
    assert parsed_for_result(json.dumps({"blob": "x" * (fill + 1)}), True) is None
