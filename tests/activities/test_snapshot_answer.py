"""The answer to an agent's snapshot request is written inside its workspace or not at all:
an agent that put a symlink where the answer goes is left unanswered, the capture it asked
for still counts, and nothing is written where the link leads. Real local sandboxes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.sandbox.snapshots import answer_request
from overnight.core.constants import SNAPSHOT_ANSWER
from tests.providers.test_behaviour import request


async def test_an_answer_is_written_where_the_agent_kit_reads_it(tmp_path: Path) -> None:
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    info, _ = await provider.get_or_create(request(f"answer-{uuid.uuid4().hex[:10]}"))
    await answer_request(provider, info.sandbox_id, 3, "ready", "snap-3")
    written = provider.engine.host_path(info.sandbox_id, SNAPSHOT_ANSWER).read_text()
    assert json.loads(written) == {"request": 3, "state": "ready", "snapshot_id": "snap-3"}
    await provider.stop(info.sandbox_id)


async def test_a_symlink_where_the_answer_goes_leaves_the_agent_unanswered_and_the_host_untouched(
    tmp_path: Path,
) -> None:
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    info, _ = await provider.get_or_create(request(f"answer-{uuid.uuid4().hex[:10]}"))
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = provider.engine.host_path(info.sandbox_id, SNAPSHOT_ANSWER).parent
    if folder.exists():
        (folder / "snapshot.json").unlink(missing_ok=True)
        folder.rename(folder.with_name(".overnight-aside"))
    folder.symlink_to(outside)
    await answer_request(provider, info.sandbox_id, 1, "ready", "snap-1")  # does not raise
    assert list(outside.iterdir()) == []
    await provider.stop(info.sandbox_id)
