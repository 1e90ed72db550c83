"""The spec's `isolation` and `binds`, and the loopback outside world of the sample agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from activities.sandbox_base.setup import KIT_DIR, spec_binds
from overnight.cli import client as api
from overnight.core.errors import SpecError
from overnight.core.models import RunSpec
from overnight.demo.outside_world import ledger_url
from overnight.demo.sample_demo import AGENT_DIR, ledger_entries

AGENT = AGENT_DIR / "main.py"
BASE: dict[str, Any] = {
    "run_id": "iso",
    "repo": "https://example.invalid/app.git",
    "agent_dir": "/agent",
    "command": "true",
}


def test_sandboxes_are_isolated_unless_the_spec_says_none() -> None:
    assert api.parse_spec(BASE).isolation == "bubblewrap"
    assert api.parse_spec({**BASE, "isolation": "none"}).isolation == "none"
    with pytest.raises(SpecError, match="field isolation"):
        api.parse_spec({**BASE, "isolation": "docker"})


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("data", "must be absolute"),
        ("/", "may not be / "),
        ("/srv/../..", "may not be / "),
        ("/workspace/app", "under /workspace"),
        ("/proc/1", "under /proc"),
    ],
)
def test_a_bind_names_an_absolute_host_path_other_than_the_root(path: str, why: str) -> None:
    with pytest.raises(SpecError, match=f"field binds.0.path: .*{why}"):
        api.parse_spec({**BASE, "binds": [{"path": path}]})


def test_binds_are_read_only_by_default_listed_once_and_local_only() -> None:
    spec = api.parse_spec(
        {**BASE, "binds": [{"path": "/srv/data/"}, {"path": "/srv/out", "writable": True}]}
    )
    assert [(b.path, b.writable) for b in spec.binds] == [("/srv/data", False), ("/srv/out", True)]
    with pytest.raises(SpecError, match="/srv/data is listed twice"):
        api.parse_spec({**BASE, "binds": [{"path": "/srv/data"}, {"path": "/srv/data/"}]})
    with pytest.raises(SpecError, match="local sandboxes only"):
        api.parse_spec({**BASE, "provider": "runtime", "binds": [{"path": "/srv/data"}]})
    with pytest.raises(SpecError, match="field binds.0.writable"):
        api.parse_spec({**BASE, "binds": [{"path": "/srv", "writable": "yes"}]})


def test_a_local_repo_is_bound_read_only_unless_a_bind_shows_it(tmp_path: Path) -> None:
    repo = tmp_path / "origin.git"
    repo.mkdir()
    local = RunSpec.model_validate({**BASE, "repo": str(repo)})
    assert [(b.path, b.writable) for b in spec_binds(local)] == [(str(repo), False)]
    shown = RunSpec.model_validate(
        {**BASE, "repo": str(repo), "binds": [{"path": str(tmp_path), "writable": True}]}
    )
    assert [(b.path, b.writable) for b in spec_binds(shown)] == [(str(tmp_path), True)]
    assert spec_binds(RunSpec.model_validate(BASE)) == ()  # a URL is cloned over the network


def _post(url: str, body: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        found: dict[str, Any] = json.loads(answer.read())
        return found


def test_the_outside_world_acts_once_per_key_and_fires_a_switch_once(tmp_path: Path) -> None:
    ledger = tmp_path / "world" / "ledger.jsonl"
    url = ledger_url(ledger)
    action = {"key": "r-step-4", "action": "open_pull_request", "detail": "x"}
    assert _post(f"{url}/actions", action) == {"done": True}
    assert _post(f"{url}/actions", action) == {"done": False}
    assert [e["key"] for e in ledger_entries(ledger)] == ["r-step-4"]
    switch = {"run_id": "r", "switch": "died-after-2"}
    assert [_post(f"{url}/once", switch)["first"] for _ in range(2)] == [True, False]
    assert (ledger.parent / ".r.died-after-2").exists()


def test_the_sample_agent_keeps_its_ledger_over_the_network(tmp_path: Path) -> None:
    ledger = tmp_path / "world" / "ledger.jsonl"
    checkpoint = tmp_path / "sandbox" / "checkpoint.json"
    env = {
        **os.environ,
        "OVERNIGHT_RUN_ID": "net",
        "OVERNIGHT_CHECKPOINT": str(checkpoint),
        "OVERNIGHT_LEDGER_URL": ledger_url(ledger),
        "AGENT_DIE_AFTER": "4",
        "PYTHONPATH": str(KIT_DIR),  # the agent kit, as in a sandbox
    }
    app = tmp_path / "app"
    app.mkdir()
    command = [sys.executable, str(AGENT), "--resume", str(checkpoint)]
    for expected in (3, 0):  # dies after opening the pull request, then finishes
        done = subprocess.run(command, cwd=app, env=env, capture_output=True, timeout=60)
        assert done.returncode == expected, done.stderr
    assert [e["key"] for e in ledger_entries(ledger)] == ["net-step-4", "net-step-5"]
    assert not (checkpoint.parent / "ledger.jsonl").exists()
