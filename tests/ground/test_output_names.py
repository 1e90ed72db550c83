"""An output's name cannot forge a label of the card or the status (issue #30, item 6):
outputs are shown as `output <name>`, and a name that is one of their labels is refused, by
the supervisor (said in `talk.refused`) and at once by the agent kit's `finish()`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from overnight.agent_kit import overnight_agent as kit
from overnight.agent_kit import overnight_agent_requests as kit_requests
from overnight.cli.render import status_text
from overnight.core.agent_requests import (
    MAX_OUTPUT_NAME_CHARS,
    OUTPUT_NAME,
    RESERVED_OUTPUT_NAMES,
    AgentTalk,
    RunOutputs,
    output_name_refusal,
    requests_of,
)
from overnight.core.models import (
    Budget,
    CheckpointSummary,
    DailyLimit,
    LastWords,
    RestartRecord,
    RunStatus,
    SnapshotRecord,
)
from overnight.core.run_costs import SafetyNet
from tests.waits import CAP
from workflows.pure.card import render_card

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
KIT = Path(kit.__file__).parent
FORGED = {"question": "Approve production deploy? (one of: yes, no)", "result": "all green"}


def everything(outputs: dict[str, str] | None = None) -> RunStatus:
    """A status with every line the card and `overnight status` can show."""
    return RunStatus(
        run_id="night",
        state="needs_attention",
        attempt=3,
        sandbox_id="night-3",
        budget=Budget(max_spend_usd=10),
        started_at=NOW - timedelta(hours=2),
        last_progress_at=NOW,
        checkpoint_summary=CheckpointSummary(next="open the PR", last_note="tests pass"),
        checkpoint_rejected="too large",
        attention_reason="budget used up",
        restarts=[RestartRecord(attempt=2, reason="agent stalled", at=NOW)],
        lease_ends_at=NOW + timedelta(minutes=30),
        isolation="bubblewrap",
        spend_charged_usd=1.0,
        daily_limit=DailyLimit(limit_usd=50, used_usd=1, remaining_usd=49, read_at=NOW),
        latest_snapshot=SnapshotRecord(snapshot_id="s1", mode="files", taken_at=NOW, attempt=3),
        snapshots_taken=1,
        last_words=LastWords(attempt=2, reason="agent stalled", at=NOW, tail="boom"),
        spend_model_usd=2.0,
        talk=AgentTalk(
            question="Go?", waiting_until=NOW + timedelta(hours=1), refused="ask: no id"
        ),
        outputs=RunOutputs(summary="done", values=outputs or {"pr": "https://x.test/pr/1"}),
        safety_net=SafetyNet(restarts=1, usd=0.1, by_cause={"stalled": 1}),
    )


def _normal(label: str) -> str:
    return re.sub(r"[-_.]+", " ", label).strip().lower()


def test_every_label_of_the_card_and_the_status_is_a_name_no_output_may_take() -> None:
    status = everything()
    card = render_card(status, NOW).splitlines()[1:]  # below the headline (its state)
    labels = {m for line in card for m in re.findall(r"\*\*([^*]+)\*\*", line)}
    text = status_text(status, now=NOW, ui_url="https://ui.test/run").splitlines()[1:]
    labels |= {m.group(1) for line in text if (m := re.match(r"  ([a-zA-Z][\w ]*):", line))}
    labels = {_normal(label) for label in labels}
    assert {"question", "result", "next step", "step", "needs you"} <= labels  # all found
    assert "output pr" in labels  # outputs are shown under their own prefix
    labels = {label.removeprefix("output pr") or "output" for label in labels}
    assert labels <= RESERVED_OUTPUT_NAMES, labels - RESERVED_OUTPUT_NAMES


def test_an_output_named_like_a_label_shows_no_such_line_on_a_finished_runs_card() -> None:
    """finish(outputs={"question": "Approve production deploy? (one of: yes, no)"}) showed as a
    `question` line on a finished run's card; `result` too."""
    raw = {"overnight": {"finish": {"summary": "done", "outputs": {**FORGED, "pr": "u"}}}}
    found = requests_of(raw)
    assert found is not None and found.finish is not None
    assert found.finish.values == {"pr": "u"}  # the label names are left out, and said
    assert found.refused is not None and "may not be named 'question'" in found.refused
    status = everything(found.finish.values).model_copy(update={"state": "finished"})
    card = render_card(status, NOW)
    text = status_text(status, now=NOW, ui_url=None)
    assert "Approve production deploy" not in card + text and "all green" not in card + text
    assert "- **output pr** u" in card and "  output pr:     u" in text
    # Even one the supervisor took (an older one's) reads as an output, not as a label.
    shown = render_card(everything(FORGED), NOW)
    assert "- **output question** Approve production deploy?" in shown
    assert "- **question** Approve" not in shown and "- **result** all green" not in shown


@pytest.mark.parametrize(
    "name", ["question", "Question", "RESULT", "next-step", "next_step", "Web.UI", "state"]
)
def test_a_label_in_any_case_and_spelling_is_refused(name: str) -> None:
    assert OUTPUT_NAME.match(name)
    why = output_name_refusal(name)
    assert why is not None and "label" in why


def test_ordinary_names_are_not_refused() -> None:
    for name in ("pr", "pr_url", "branch", "next_pr", "model", "test-results", "summary2"):
        assert output_name_refusal(name) is None, name


def test_the_kits_finish_raises_at_once_for_a_name_the_supervisor_refuses(
    tmp_path: Path,
) -> None:
    assert kit.RESERVED_OUTPUT_NAMES == RESERVED_OUTPUT_NAMES
    assert kit.MAX_OUTPUT_NAME_CHARS == MAX_OUTPUT_NAME_CHARS
    for name in ("pr", "a.b-c_d", "Next--Step", "-x", "x y", "é", "x" * 64, "x" * 65, ""):
        taken = output_name_refusal(name) is None
        assert kit_requests._is_output_name(name) == bool(
            isinstance(name, str) and OUTPUT_NAME.match(name)
        )
        if taken:
            kit_requests._check_output_names({name: "v"})
        else:
            with pytest.raises(ValueError):
                kit_requests._check_output_names({name: "v"})
    script = (
        "import json, sys\n"
        "from overnight_agent import finish\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        finish('done', {name: 'x'})\n"
        "    except ValueError as error:\n"
        "        print('refused', error)\n"
        "    else:\n"
        "        print('taken', name)\n"
    )
    names = ["Question", "next step", "bad name!", "pr"]
    ran = subprocess.run(
        [sys.executable, "-c", script, json.dumps(names)],
        env={"PYTHONPATH": str(KIT), "OVERNIGHT_CHECKPOINT": str(tmp_path / "checkpoint.json")},
        capture_output=True,
        text=True,
        timeout=CAP,
        check=True,
    )
    said = ran.stdout.splitlines()
    assert said[0].startswith("refused finish: an output may not be named 'Question'")
    assert said[1].startswith("refused") and said[2].startswith("refused")
    assert said[3] == "taken pr"
