"""The coding-agent adapter's `progress_mark` (overnight/agent_kit/coding_agent.py), with the
real CLIs in bubblewrap (those whose own retries end in seconds: Claude Code): it says new
work only. A model API the CLI cannot reach at all (its port closed) has the adapter rewrite
its checkpoint at each try, a new `next` each time, with the same mark: no progress, so the
run meets its stall. (A model API that answers
529s has the adapter wait as told, and each of those waits moves the mark, `waits`: the API is
there, and no restart would end its trouble. That run is test_coding_agent.py's
`test_529s_after_the_clis_own_retries_are_waited_out_in_the_same_session`.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fakes.model_api import FakeModelApi
from tests.agent_clis.adapter import Adapter, Workspace, environment, wait_until
from tests.agent_clis.test_coding_agent import adapters, kind, make_workspace  # noqa: F401
from tests.kinds import facts


def backoffs(ws: Workspace) -> list[dict[str, object]]:
    return [line for line in ws.log() if line["event"] == "api_backoff"]


def test_a_model_api_out_of_reach_rewrites_the_checkpoint_with_the_same_mark(
    make_workspace: Callable[..., Workspace],  # noqa: F811
    adapters: list[Adapter],  # noqa: F811
    kind: str,  # noqa: F811
) -> None:
    if not facts(kind).retries_quickly:
        pytest.skip(f"{kind}'s own retries of an unreachable API take minutes at its defaults")
    ws = make_workspace()
    with FakeModelApi([]) as fake:
        ws.write_config(fake)
        env = environment(fake, kind, ws)
    # The fake is closed: its port refuses every connection.
    adapter = Adapter.start(ws, env)
    adapters.append(adapter)
    wait_until(lambda: len(backoffs(ws)) >= 2, 120, "two backoffs")
    first = ws.checkpoint()

    def moved_on() -> dict[str, Any] | None:
        """The checkpoint once two more backoffs came and its `next` is another: the CLI's own
        retry line repeats ('the CLI retries (1/1)' each time it starts again), so a snapshot
        taken at once could meet the same line (a CI-form run under load did)."""
        now = ws.checkpoint()
        return now if len(backoffs(ws)) >= 4 and now.get("next") != first["next"] else None

    # Rewritten: the status moves on.
    again = wait_until(moved_on, 120, "two more backoffs and another `next`")
    assert {b["status"] for b in backoffs(ws)} == {None}  # no answer at all
    assert again["progress_mark"] == first["progress_mark"]  # but no new work, no wait told
    assert again["progress_mark"]["step"] == 0
