"""`overnight start --many TASKS.jsonl`: both forms of the tasks file, every bad line refused
before anything starts (exit 2 naming the line), and a re-run on the real dev server starting
nothing twice."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from fakes.provider import read_events
from overnight.core.admission import AdmissionSettings
from overnight.core.errors import SpecError
from overnight.core.task_lines import load_tasks
from overnight.worker.devserver import DevServer
from tests.admission.pool import short_pool

OVERNIGHT = Path(sys.executable).parent / "overnight"


def tasks_file(folder: Path, *lines: object) -> Path:
    (folder / "agent").mkdir(exist_ok=True)
    path = folder / "tasks.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


BASE = {
    "base": {
        "repo": "/fake/app.git",
        "agent_dir": "agent",
        "command": "python3 main.py --issue {{issue}}",
        "env": {"ISSUE": "{{issue}}"},
    }
}


def test_one_spec_a_line(tmp_path: Path) -> None:
    spec = {"repo": "/r.git", "agent_dir": "agent", "command": "go"}
    path = tasks_file(tmp_path, spec, "", "# a comment", {**spec, "run_id": "named", "priority": 1})
    first, second = load_tasks(path)
    assert (first.line, second.line) == (1, 4)
    assert first.spec.run_id.startswith("task-") and second.spec.run_id == "named"
    assert first.spec.agent_dir == str(tmp_path / "agent")  # from the file's folder
    assert second.spec.priority == 1


def test_a_base_and_variables_per_line(tmp_path: Path) -> None:
    path = tasks_file(
        tmp_path,
        BASE,
        {"vars": {"issue": 12}},
        {"vars": {"issue": "13"}, "priority": 1, "owner": "team-b"},
    )
    twelve, thirteen = load_tasks(path)
    assert twelve.spec.command == "python3 main.py --issue 12"
    assert twelve.spec.env == {"ISSUE": "12"}
    assert (thirteen.spec.priority, thirteen.spec.owner) == (1, "team-b")
    assert twelve.spec.run_id != thirteen.spec.run_id
    # The same content names the same run every time.
    assert [t.spec.run_id for t in load_tasks(path)] == [twelve.spec.run_id, thirteen.spec.run_id]


def test_the_same_line_twice_is_one_run(tmp_path: Path) -> None:
    path = tasks_file(tmp_path, BASE, {"vars": {"issue": 1}}, {"vars": {"issue": 1}})
    first, again = load_tasks(path)
    assert again.spec.run_id == first.spec.run_id and again.same_as == 2


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        (
            [BASE, {"vars": {"issue": 1}}, {"vars": {"issue": 2}, "priority": 9}],
            "line 3: field priority",
        ),
        ([BASE, {"vars": {"other": 1}}], "line 2: the base uses {{issue}}"),
        ([{"repo": "/r", "agent_dir": "a", "command": "c"}, "{not json"], "line 2: not valid JSON"),
        ([{"repo": "/r", "agent_dir": "a", "command": "c"}, BASE], "line 2: `base` may only"),
        ([{"repo": "/r", "agent_dir": "a", "command": "c", "vars": {}}], "line 1: `vars` needs"),
        ([BASE, ["a list"]], "line 2: a line is one JSON object"),
        ([BASE], "no runs in it"),
    ],
)
def test_a_bad_line_is_refused_naming_it(tmp_path: Path, lines: list[object], why: str) -> None:
    path = tasks_file(tmp_path, *lines)
    with pytest.raises(SpecError, match=rf"tasks\.jsonl.*{why}".replace("{{", r"\{\{")):
        load_tasks(path)


def test_the_command_refuses_a_bad_file_before_connecting(tmp_path: Path) -> None:
    path = tasks_file(tmp_path, BASE, {"vars": {"issue": 1}}, {"vars": {"issue": 2}, "vcpu": 0})
    done = subprocess.run(
        # Nothing listens on port 9: a start would fail, not exit 2.
        [str(OVERNIGHT), "--address", "127.0.0.1:9", "start", "--many", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "line 3" in done.stderr and "vcpu" in done.stderr
    assert done.stdout == ""


async def test_a_rerun_starts_nothing_twice(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    boxes = tmp_path / "boxes"
    lines = [{"vars": {"issue": n}} for n in range(4)]
    path = tasks_file(tmp_path, BASE, *lines, lines[0])
    async with short_pool(dev_client, boxes, AdmissionSettings()) as queue:
        first = await _many(dev_server, path, queue)
        assert first.returncode == 0, first.stderr
        answer = json.loads(first.stdout)
        assert (answer["started"], answer["already_started"], answer["failed"]) == (4, 1, 0)
        ids = [run["run_id"] for run in answer["runs"]]
        assert len(set(ids)) == 4 and ids[4] == ids[0]
        # Again, once some have finished and while others may still run.
        again = await _many(dev_server, path, queue, json_out=False)
        assert again.returncode == 0, again.stderr
        assert "5 runs: 0 started, 5 already started, 0 failed" in again.stdout
        assert all(run_id in again.stdout for run_id in ids)
        for run_id in set(ids):
            await dev_client.get_workflow_handle(run_id).result()
    started = [e.run_id for e in read_events(boxes) if e.up]
    assert sorted(started) == sorted(set(ids)), "each run made one sandbox, once"


async def _many(
    server: DevServer, path: Path, queue: str, *, json_out: bool = True
) -> subprocess.CompletedProcess[str]:
    args = [str(OVERNIGHT), "--address", server.address, "start", "--many", str(path)]
    args += ["--task-queue", queue] + (["--json"] if json_out else [])
    return await asyncio.to_thread(
        subprocess.run, args, capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )
