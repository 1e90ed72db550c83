"""The kit's requests as the supervisor reads them (overnight.core.agent_requests): agent JSON, so
whatever is there never raises; a request out of shape or over a limit is dropped and said;
what is kept is bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from overnight.core.agent_requests import (
    MAX_OUTPUT_CHARS,
    MAX_OUTPUTS,
    AskRequest,
    choice_refusal,
    merged,
    parse_when,
    requests_in,
    requests_of,
    requests_path,
    usages,
)
from overnight.core.checkpoint_text import facts_of

ASK = {"id": "q1-abc", "question": "Go?", "choices": ["yes", "no"]}


def test_a_well_formed_set_of_requests_is_read_whole() -> None:
    found = requests_of(
        {
            "overnight": {
                "ask": ASK,
                "wait": {"id": "w1-x", "until": "2026-12-01T04:00:00Z", "reason": "window"},
                "usage": {"stream": "a1-p7-1", "usd": 2.5, "input_tokens": 10},
                "finish": {"summary": "done", "outputs": {"pr": "u", "n": 3}},
            }
        }
    )
    assert found is not None and found.refused is None
    assert found.ask == AskRequest(**ASK)
    assert found.wait is not None and found.wait.until == datetime(2026, 12, 1, 4, tzinfo=UTC)
    assert found.usage is not None and found.usage.usd == 2.5
    assert found.finish is not None and found.finish.values == {"pr": "u", "n": "3"}


def test_requests_out_of_shape_are_refused_and_said() -> None:
    cases: list[tuple[Any, str]] = [
        ({"ask": {"id": "../etc", "question": "x"}}, "ask: needs an `id`"),
        ({"ask": {"id": "q1", "question": "x" * 5000}}, "ask: `question` is over"),
        ({"ask": {"id": "q1", "question": "x", "choices": ["a"] * 50}}, "ask: `choices`"),
        ({"wait": {"id": "w1", "until": "soon"}}, "wait_until: `until`"),
        ({"usage": {"stream": "s", "usd": -1}}, "usage: needs"),
        ({"usage": {"stream": "s", "usd": float("inf")}}, "usage: needs"),
        ({"usage": {"stream": "s", "usd": 1e12}}, "usage: needs"),
        # Past what a float holds.
        ({"usage": {"stream": "s", "usd": 10**400}}, "usage: needs"),
        ({"usage": {"stream": "s", "input_tokens": 10**400}}, "usage: needs"),
        ("not an object", "`overnight` is not an object"),
    ]
    for raw, said in cases:
        found = requests_of({"overnight": raw})
        assert found is not None and found.refused is not None, raw
        assert found.refused.startswith(said), (raw, found.refused)
        assert found.ask is None and found.wait is None and found.usage is None


def test_a_number_past_what_a_float_holds_refuses_its_request_alone() -> None:
    found = requests_of(
        {"overnight": {"ask": ASK, "usage": {"stream": "s", "usd": 1, "output_tokens": 10**400}}}
    )
    assert found is not None and found.ask == AskRequest(**ASK)
    assert found.usage is None
    assert found.refused is not None and found.refused.startswith("usage: needs")


def test_outputs_are_bounded() -> None:
    outputs = {f"k{i}": "v" * 10_000 for i in range(50)}
    found = requests_of({"overnight": {"finish": {"summary": "s", "outputs": outputs}}})
    assert found is not None and found.finish is not None
    assert len(found.finish.values) == MAX_OUTPUTS
    assert all(len(v) <= MAX_OUTPUT_CHARS for v in found.finish.values.values())
    assert found.refused is not None and "only the first" in found.refused


def test_an_output_name_out_of_shape_is_dropped_and_said_never_clipped_into_another() -> None:
    long = "n" * 64
    outputs = {"pull request": "a", long + "1": "b", long + "2": "c", "pr": "d"}
    found = requests_of({"overnight": {"finish": {"summary": "s", "outputs": outputs}}})
    assert found is not None and found.finish is not None
    assert found.finish.values == {"pr": "d"}
    assert found.refused is not None and found.refused.startswith("finish: an output's name")


def test_the_checkpoint_facts_carry_the_requests() -> None:
    text = json.dumps({"step": 1, "overnight": {"ask": ASK}})
    facts = facts_of(text)
    assert facts.requests is not None and facts.requests.ask is not None
    assert facts_of(json.dumps({"step": 1})).requests is None


def test_answers_are_checked_against_the_choices() -> None:
    asked = AskRequest(**ASK)
    assert choice_refusal(asked, "yes") is None
    assert choice_refusal(asked, "maybe") == "the answer must be one of: yes, no"
    assert choice_refusal(asked, " ") == "the answer is empty"
    assert choice_refusal(AskRequest(id="q", question="?"), "anything") is None


def test_times_read_as_iso_or_epoch_and_nothing_else() -> None:
    assert parse_when(0) == datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_when("2026-12-01T04:00:00") == datetime(2026, 12, 1, 4, tzinfo=UTC)
    zoned = parse_when("2026-12-01T13:30:00+10:00")  # in UTC, as the status says it
    assert zoned == datetime(2026, 12, 1, 3, 30, tzinfo=UTC) and zoned.tzinfo is UTC
    for bad in (True, -1, 1e300, "x" * 100, None, [], "2026-13-01", "0001-01-01T00:00+14:00"):
        assert parse_when(bad) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
KEYS = st.sampled_from(["ask", "wait", "usage", "finish", "other"])


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        KEYS,
        JSON
        | st.dictionaries(
            st.sampled_from(
                list(ASK)
                + ["until", "reason", "stream", "usd", "input_tokens", "summary", "outputs"]
            ),
            JSON,
        ),
    )
)
def test_any_json_never_raises(raw: dict[str, Any]) -> None:
    found = requests_of({"overnight": raw})
    assert found is not None


def test_secrets_in_outputs_and_questions_are_redacted_before_they_leave_the_worker() -> None:
    from activities.providers.protocol import FileRead
    from activities.sandbox_base.checkpoints import checkpoint_from
    from overnight.core.output_tail import REDACTED

    secret = 'sk-live-"quoted"-0123456789'
    text = json.dumps(
        {
            "overnight": {
                "ask": {"id": "q1-a", "question": f"Use {secret}?"},
                "finish": {"summary": f"pushed with {secret}", "outputs": {"token": secret}},
            }
        }
    )
    read = checkpoint_from(FileRead(status="ok", data=text.encode()), None, [secret])
    assert read.facts is not None and read.facts.requests is not None
    said = read.facts.requests
    assert said.ask is not None and said.finish is not None
    assert said.ask.question == f"Use {REDACTED}?"
    assert said.finish.summary == f"pushed with {REDACTED}"
    assert said.finish.values == {"token": REDACTED}
    assert secret not in read.model_dump_json()


def test_a_secret_spelled_with_other_json_escapes_never_leaves_the_worker() -> None:
    """Go writes `&`, `<`, `>` as `\\u0026`..., PHP `/` as `\\/`: the text shows no secret,
    but what it parses to would (the requests, the result's `checkpoint_json`)."""
    from activities.providers.protocol import FileRead
    from activities.sandbox_base.checkpoints import checkpoint_from
    from overnight.core.output_tail import REDACTED

    secret = "sk-live-a&b<c>d/0123456789"
    spelled = json.dumps(secret).replace("&", "\\u0026").replace("<", "\\u003C")
    spelled = spelled.replace(">", "\\u003e").replace("/", "\\/")
    assert secret not in spelled
    text = (
        '{"next": %s, "overnight": {"ask": {"id": "q1-a", "question": %s},'
        ' "finish": {"summary": %s, "outputs": {"token": %s}},'
        ' "usage": {"stream": "a1", "usd": 1, "model": %s}}}' % ((spelled,) * 5)
    )
    read = checkpoint_from(FileRead(status="ok", data=text.encode()), None, [secret])
    assert read.text is not None and read.facts is not None
    assert secret not in repr(json.loads(read.text))
    said = read.facts.requests
    assert said is not None and said.ask is not None and said.finish is not None
    assert said.ask.question == REDACTED
    assert said.finish.values == {"token": REDACTED}
    assert secret not in repr(read.facts)


def test_the_requests_file_is_beside_the_checkpoint() -> None:
    assert requests_path("/workspace/checkpoint.json") == "/workspace/.overnight-requests.json"
    assert requests_path("/workspace/state/cp.json") == "/workspace/state/.overnight-requests.json"


@settings(max_examples=60, deadline=None)
@given(JSON)
def test_a_requests_file_of_any_json_never_raises(value: Any) -> None:
    found = requests_in(value)
    assert found.refused is not None or isinstance(value, dict)


def test_a_requests_file_that_is_no_object_is_refused_and_says_so() -> None:
    assert requests_in([1, 2]).refused == "the requests file is not an object"
    in_checkpoint = requests_of({"overnight": [1]})
    assert in_checkpoint is not None and in_checkpoint.refused == "`overnight` is not an object"


def test_the_file_wins_each_kind_it_holds_and_the_checkpoint_fills_the_rest() -> None:
    in_file = requests_in({"ask": ASK, "usage": {"stream": "a1-p1-1", "usd": 2.0}})
    other = {"id": "q1-other", "question": "Other?"}
    in_checkpoint = requests_of(
        {
            "overnight": {
                "ask": other,
                "wait": {"id": "w1-x", "until": "2026-12-01T04:00:00Z"},
                "usage": {"stream": "a1-p1-1", "usd": 1.0},
                "finish": {"summary": "done"},
            }
        }
    )
    both = merged(in_file, in_checkpoint)
    assert both is not None
    assert both.ask == AskRequest(**ASK)
    assert both.wait is not None and both.wait.id == "w1-x"
    assert both.finish is not None and both.finish.summary == "done"
    assert merged(None, in_checkpoint) == in_checkpoint
    assert merged(in_file, None) == in_file
    assert merged(None, None) is None
    # The same stream in both: the file's report; two streams: both (each is cumulative).
    assert [u.usd for u in usages(in_file, in_checkpoint)] == [2.0]
    apart = requests_of({"overnight": {"usage": {"stream": "a1-p9-1", "usd": 0.5}}})
    assert sorted(u.usd for u in usages(in_file, apart)) == [0.5, 2.0]
    assert usages(None, None) == []
