"""`python -m bench.coding_agents`, tiny: one crash of the real pinned Claude Code CLI (a task
of 3 tool calls, SIGKILLed during call 2) resumed by overnight's adapter and rerun from scratch
by the naive loop, against the fake model API. The figures must be sane (overnight's way
redoes at most one turn, the naive loop more), not fast; and the rows go to the results
beside the other groups'. A few seconds; skipped only when the CLI is not installed."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from bench.coding_agents import AGENTS_HOME_ENV, adapter_available, measure
from bench.coding_agents_rows import GROUP, result_rows
from bench.coding_agents_samples import Sample
from bench.coding_agents_task import command
from bench.report import GROUPS, Row, save_results
from overnight.core.agent_kinds import agent_cli
from overnight.core.coding_agents import INSTALL_SCRIPT
from overnight.worker.agent_clis import check
from tests.waits import CAP


def _agents_home() -> Path:
    return Path(os.environ.get(AGENTS_HOME_ENV) or Path.home() / ".cache" / "overnight-test-agents")


def test_one_crash_redoes_one_turn_resumed_and_all_rerun_from_scratch() -> None:
    home = _agents_home()
    if not check(agent_cli("claude-code"), home, verify=False).ready:
        pytest.skip(f"Claude Code is not installed under {home} ({INSTALL_SCRIPT})")
    assert adapter_available()
    printed: list[str] = []
    samples = measure(["claude-code"], home, calls=3, crash_at=[2], out=printed.append)

    ours, naive = (next(s for s in samples if s.way == way) for way in ("overnight", "naive"))
    assert ours.finished and naive.finished, (ours.notes, naive.notes)
    assert ours.resume_by == "adapter" and ours.notes == [] and naive.notes == []
    assert ours.requests == 3 + 1 + 1 and ours.redone == 1  # call 2 asked for again
    assert naive.requests == 3 + 1 + 2 and naive.redone == 2  # calls 1 and 2 again
    assert (ours.sessions, naive.sessions) == (1, 2)
    # Sane, not fast: under CAP, not 30 s (a loaded machine starts the CLI's node slowly).
    for sample in samples:
        assert 0 < sample.back_seconds < CAP
        assert sample.back_seconds <= sample.caught_up_seconds < CAP
    assert 0 < ours.stages["cli_ended"] <= ours.stages["cli_started"] < ours.back_seconds
    assert 0 < ours.lost_usd < naive.lost_usd < naive.clean_usd
    assert [json.loads(line)["way"] for line in printed] == ["overnight", "naive"]

    rows = result_rows(samples)
    assert {row.group for row in rows} == {GROUP}
    assert all(row.baseline is not None and row.overnight is not None for row in rows)
    redone = rows[0]
    assert redone.metric == "claude-code: model turns redone per crash, median"
    assert (redone.baseline, redone.overnight, redone.passed) == (2, 1, True)


def _sample(way: str, k: int, redone: int, back: float) -> Sample:
    return Sample(
        kind="claude-code",
        way=way,  # type: ignore[arg-type]
        resume_by="adapter" if way == "overnight" else "",
        calls=10,
        crash_at=k,
        requests=11 + redone,
        redone=redone,
        back_seconds=back,
        caught_up_seconds=back + (0.1 * k if way == "naive" else 0),
        lost_input_tokens=13_000 * redone,
        lost_output_tokens=40 * redone,
        lost_usd=0.04 * redone,
        clean_usd=0.44,
        sessions=1 if way == "overnight" else 2,
        finished=True,
        stages={"cli_ended": 0.05, "cli_started": 0.06} if way == "overnight" else {},
    )


def test_the_rows_say_pass_or_fail_per_target_and_keep_the_other_groups(tmp_path: Path) -> None:
    samples = [_sample("overnight", k, 1, 0.7) for k in (2, 4, 6)]
    samples += [_sample("naive", k, k, 0.5) for k in (2, 4, 6)]
    rows = result_rows(samples)
    by = {row.metric.split(": ", 1)[1]: row for row in rows}
    assert by["model turns redone per crash, median"].baseline == 4
    assert by["model turns redone per crash, max"].baseline == 6
    assert all(row.passed for row in rows if row.at_most is not None)
    assert (
        "the adapter done with the dead CLI 0.05 s"
        in by["crash -> the CLI's next model request, median"].note
    )
    slow = result_rows([*samples[:2], _sample("overnight", 6, 2, 2.5), *samples[3:]])
    failed = {row.metric.split(": ", 1)[1] for row in slow if row.passed is False}
    assert failed == {
        "model turns redone per crash, max",
        "crash -> the CLI's next model request, max",
    }
    assert math.isclose(by["spend lost per crash, median"].baseline or 0, 0.16)

    assert GROUP in GROUPS
    other = Row("disk watch: one measure", "s", None, 0.2, at_most=1, group="disk")
    page = tmp_path / "performance.md"
    meta = {"command": "python -m bench.sandbox_disk", "finished_at": "t1", "metrics": ["disk"]}
    save_results(tmp_path, [other], {}, meta, page=page)
    meta = {"command": "python -m bench.coding_agents", "finished_at": "t2", "metrics": [GROUP]}
    written, json_path, _ = save_results(tmp_path, rows, {}, meta, page=page)
    groups = [row["group"] for row in json.loads(json_path.read_text())["rows"]]
    assert groups == ["disk"] + [GROUP] * len(rows)  # in GROUPS' order, the disk row kept


def test_only_the_crash_call_waits_for_the_kill() -> None:
    assert "sleep" not in command(1, 2, "/workspace/.crashed")
    waits = command(2, 2, "/workspace/.crashed")
    assert "[ -e /workspace/.crashed ] || exec sleep 60" in waits
    # Its result says `step 2 ok`; the command itself does not (the model reads results).
    assert "step 2 ok" not in waits
