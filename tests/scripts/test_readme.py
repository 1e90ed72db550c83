"""The README tells a newcomer what the first hour needs: a spec.json that is one, what its
paths become in the sandbox, that `run_id` may be left out, the demo's transcript as the demo
prints it (its `safety net:` line too), where it writes, and where the Web UI shows the card."""

from __future__ import annotations

import re
from pathlib import Path

from overnight.core.specs import load_spec

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def block_after(marker: str, language: str) -> str:
    start = README.index(marker)
    found = re.search(rf"```{language}\n(.*?)```", README[start:], re.DOTALL)
    assert found, marker
    return found.group(1)


def test_the_minimal_spec_is_a_complete_spec_file(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "spec.json").write_text(block_after("a complete minimal `spec.json`", "json"))
    spec = load_spec(folder / "spec.json")
    assert (spec.repo, spec.agent_dir) == (str(tmp_path / "app"), str(folder / "agent"))
    for said in ("/workspace/app", "/workspace/agent", "/workspace/checkpoint.json"):
        assert said in README


def test_it_says_run_id_may_be_left_out_and_what_two_starts_do() -> None:
    assert "Only `repo`, `agent_dir` and `command` are required" in README
    assert "`run_id`, `repo`" not in README
    assert "each `overnight start` of the file starts a new run" in README


def test_the_transcript_is_what_the_demo_prints() -> None:
    transcript = block_after("## A short session", "console")
    assert re.search(
        r"^safety net: \$\d+\.\d{4} \(\d+\.\d% of the sandbox cost\): 1 restart\(s\)",
        transcript,
        re.MULTILINE,
    )
    assert transcript.splitlines()[1].startswith("dev server settings: ")
    last = transcript.rstrip().splitlines()[-1]
    assert last == "the dev server is stopped now; `--keep-server` leaves it and the Web UI running"
    after_start = transcript.split("\n", 5)[-1]
    assert "Web UI:" not in after_start.split("finished after", 1)[1]


def test_it_says_where_the_demo_writes_and_where_the_card_is() -> None:
    assert "`$OVERNIGHT_HOME-demo`" in README
    assert "User Metadata →\nCurrent Details" in README or "User Metadata → Current Details" in (
        README
    )
