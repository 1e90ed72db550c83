"""`RunSpec.labels` (issue 52): words to find a run by in the console and the Web UI, held to
what a search attribute's value can be, and the row memo read leniently."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from overnight.core.models import RunSpec
from overnight.core.run_row import row_from_memo


def spec(**fields: object) -> RunSpec:
    return RunSpec(repo="/srv/repo", agent_dir="/srv/agent", command="true", **fields)  # type: ignore[arg-type]


def test_plain_labels_are_taken_and_none_is_the_default() -> None:
    assert spec().labels == []
    assert spec(labels=["nightly", "team:web", "v1.2/fix-3"]).labels == [
        "nightly",
        "team:web",
        "v1.2/fix-3",
    ]


@pytest.mark.parametrize(
    ("labels", "said"),
    [
        (["two words"], "labels.0"),
        (["<script>"], "labels.0"),
        (["-flag"], "labels.0"),
        (["x" * 41], "labels.0"),
        (["same", "same"], "given once each: same twice"),
        ([f"l{n}" for n in range(11)], "at most 10"),
    ],
)
def test_labels_a_search_attribute_cannot_hold_are_refused_naming_the_field(
    labels: list[str], said: str
) -> None:
    with pytest.raises(ValidationError, match=said):
        spec(labels=labels)


def test_a_row_memo_is_read_as_far_as_it_goes() -> None:
    assert row_from_memo(None) is None
    assert row_from_memo({"state": "running", "attempt": "many"}) is None
    row = row_from_memo({"state": "running", "attempt": 2, "from_a_newer_version": 1})
    assert row is not None and (row.state, row.attempt, row.spend_usd) == ("running", 2, 0)
