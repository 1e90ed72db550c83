"""`python -m bench.redaction`, tiny: both columns are measured (no figure means anything)."""

from __future__ import annotations

from bench.redaction import SECRETS, checkpoint, rows
from overnight.core.output_tail import REDACTED, redact, with_json_forms


def test_the_redaction_bench_measures_both_columns_on_a_checkpoint_of_its_size() -> None:
    found = rows(repeats=1, size=16 * 1024)
    assert found[0].baseline is not None and found[0].overnight is not None
    assert found[1].overnight is not None and found[0].group == "redaction"
    text = checkpoint(16 * 1024)
    assert len(text.encode()) >= 16 * 1024
    # Its checkpoint holds no secret: both columns do the same work, the search.
    assert REDACTED not in redact(text, with_json_forms(SECRETS))
