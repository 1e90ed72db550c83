"""`overnight start` and the worker's grants (overnight/core/grants.py): the CLI warns of what no
worker allows, and, when the shell sets the grant settings, of what a worker with them would
refuse; it still starts the run (the worker decides). `--wait` on a run its worker refused exits
2 with the refusal's one line."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from overnight.cli.main import main
from overnight.core.grants import Grants
from overnight.core.home import overnight_home
from overnight.worker.devserver import DevServer
from tests.cli.test_cli import NOWHERE, OVERNIGHT, good_spec, write_spec
from tests.live import in_process_worker

GRANT_SETTINGS = (
    "OVERNIGHT_ALLOW_UNISOLATED",
    "OVERNIGHT_SECRET_ENV",
    "OVERNIGHT_BIND_ROOTS",
    "OVERNIGHT_WRITABLE_BIND_ROOTS",
)


@pytest.fixture
def no_grants(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GRANT_SETTINGS:
        monkeypatch.delenv(name, raising=False)


def start(capsys: pytest.CaptureFixture[str], spec: Path) -> tuple[int, list[str]]:
    code = main([*NOWHERE, "start", str(spec)])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.usefixtures("no_grants")
def test_start_warns_of_what_no_worker_allows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inside = overnight_home() / "sandboxes" / "other-run"
    code, err = start(capsys, write_spec(tmp_path, good_spec(binds=[{"path": str(inside)}])))
    # Warned, then on to the server (none listens here: exit 1, as for any spec).
    assert code == 1 and len(err) == 2
    assert err[0].startswith(f"overnight: warning: spec: field binds: {inside} is inside ")
    assert err[0].endswith("the worker that takes the run decides by its own)")
    # What a worker may grant: the shell does not say what its workers grant, so no warning.
    asks = good_spec(secret_env=["RUNTIME_API_KEY"], isolation="none")
    code, err = start(capsys, write_spec(tmp_path, asks))
    assert code == 1 and len(err) == 1 and "warning" not in err[0]


@pytest.mark.usefixtures("no_grants")
def test_start_warns_of_what_a_worker_with_this_shells_settings_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_spec(tmp_path, good_spec(secret_env=["RUNTIME_API_KEY"], isolation="none"))
    monkeypatch.setenv("OVERNIGHT_SECRET_ENV", "GITHUB_TOKEN")
    code, err = start(capsys, spec)
    assert code == 1 and len(err) == 2
    assert err[0].startswith("overnight: warning: spec: field isolation: ")
    assert "; field secret_env: RUNTIME_API_KEY is not in this worker's allow-list" in err[0]

    monkeypatch.setenv("OVERNIGHT_ALLOW_UNISOLATED", "1")
    monkeypatch.setenv("OVERNIGHT_SECRET_ENV", "RUNTIME_API_KEY")
    code, err = start(capsys, spec)
    assert code == 1 and len(err) == 1 and "warning" not in err[0]


async def test_start_wait_on_a_run_its_worker_refuses_exits_2_with_the_refusal(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    run_id = f"cli-refused-{uuid.uuid4().hex[:6]}"
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)  # only the grant is refused
    raw: dict[str, Any] = good_spec(run_id=run_id, repo=str(repo), secret_env=["TEMPORAL_API_KEY"])
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(raw))
    env = {k: v for k, v in os.environ.items() if k not in GRANT_SETTINGS}
    async with in_process_worker(dev_client, "cli-refuse", grants=Grants()) as queue:
        done = await asyncio.to_thread(
            subprocess.run,
            [str(OVERNIGHT), "--address", dev_server.address, "start", str(spec), "--wait"]
            + ["--task-queue", queue],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    assert done.returncode == 2, done.stderr
    [refused] = done.stderr.strip().splitlines()
    assert refused == (
        "overnight: spec: field secret_env: TEMPORAL_API_KEY is not in this worker's allow-list "
        "(start the worker with OVERNIGHT_SECRET_ENV=TEMPORAL_API_KEY to allow it)"
    )
    assert done.stdout.startswith(f"started {run_id}")
