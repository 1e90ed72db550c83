"""Issue 47's first hole, through a real run: a coding agent's session store is inside its disk
limit, and gone from the worker once the run ends.

The real Claude Code CLI, run by overnight's adapter against the scripted fake model API, in a
bubblewrap sandbox with `disk_mib` 64 on a worker that makes images; its Bash tool writes
200 MiB, then 20,000 files, into the run's session store at `/overnight/session`. Both are
refused by the limit (`ENOSPC`: the store is an ext4 image of its own, 16 MiB of the 64), the
run goes on and finishes, and once it has ended the worker holds nothing of the store:
`$OVERNIGHT_HOME/sessions/<run_id>` is gone and nothing is mounted there. On the main of
before, `fallocate -l 200M` and the 20,000 files landed on the host's own disk, and the store
held them after the run until `overnight reap`. (The store's own rules, engine by engine:
tests/providers/test_local_run_store.py.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from activities.coding_agent.setup import session_store
from activities.providers.local import disk_image
from activities.providers.local.disk_limit import DISK_ENV
from fakes.model_api import FakeModelApi, Shell, text, tools
from fakes.model_api.turns import Answer
from overnight.core.home import overnight_home
from overnight.worker.agent_clis import Installed
from tests.agent_clis.conftest import agents_home, installed_cli  # noqa: F401 (fixtures)
from tests.e2e.coding_agent_runs import (
    agents_queue,  # noqa: F401 (a fixture)
    claude_code,  # noqa: F401 (a fixture)
    credential,  # noqa: F401 (a fixture)
    run_result,
    start_coding_run,
)

RESULT_TIMEOUT = 120
WRITE_200M = (
    "fallocate -l 200M /overnight/session/big; echo fallocate=$?; "
    "dd if=/dev/zero of=/overnight/session/dd bs=1M count=200 2>&1 | tail -1; "
    "ls -la /overnight/session/; rm -f /overnight/session/big /overnight/session/dd"
)
FILES_20000 = (
    'python3 -c "import os\nn=0\ntry:\n    for i in range(20000):\n'
    "        open(f'/overnight/session/f{i}', 'w').close(); n+=1\n"
    "except OSError as e:\n    print('stopped', n, e)\nprint('made', n)\""
)
needs_images = pytest.mark.skipif(
    disk_image.unavailable(Path("/tmp")) is not None,
    reason=f"no loop-mounted images here: {disk_image.unavailable(Path('/tmp'))}",
)


@needs_images
async def test_a_coding_agent_cannot_fill_the_host_through_its_session_store(
    dev_client: Client,
    agents_queue: str,  # noqa: F811
    claude_code: Installed,  # noqa: F811
    credential: None,  # noqa: F811
    runs: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(DISK_ENV, "image")  # the worker in this process makes images
    script: list[Answer] = [
        tools(Shell(WRITE_200M), label="bytes"),
        tools(Shell(FILES_20000), label="files"),
        text("Done, despite the full store.", label="final"),
    ]
    with FakeModelApi(script) as fake:
        spec, _ = await start_coding_run(
            dev_client, agents_queue, runs, tmp_path, fake, "store-limit", disk_mib=64
        )
        result = await run_result(dev_client, spec.run_id, RESULT_TIMEOUT)
        requests = fake.requests()

    assert [r.label for r in requests] == ["bytes", "files", "final"]
    wrote = requests[1].result_for(requests[0].call_ids[0])
    made = requests[2].result_for(requests[1].call_ids[0])
    assert wrote is not None and made is not None
    print(f"\n200M: {wrote.output}\n20,000 files: {made.output}")
    assert "No space left on device" in wrote.output and "fallocate=1" in wrote.output
    assert "No space left on device" in made.output
    assert int(made.output.split("made ")[1].split()[0]) < 1_024  # its 16 MiB's inodes
    assert result.outcome == "finished" and result.restarts == 0
    # The run has ended: the worker holds nothing of its store.
    store = session_store(spec.run_id)
    assert not store.exists(), sorted(p.name for p in store.iterdir())
    assert disk_image.mounts_under(overnight_home() / "sessions") == []
