"""How the worker starts an agent in its sandbox (`create_sandbox`, `start_agent`): the
command, its folder and environment, and the start key that names the start.

The start key, `{run_id}-{attempt}-{fresh_start}` (then `-p{resumed}`, `-d{done_round}`,
`-c{ci_round}` when set), makes a retried start of the same agent the same start (the
provider starts it once), and names its exit marker; forensics read runs back from it
(activities/providers/forensics.py).
"""

from __future__ import annotations

from activities.coding_agent import setup as coding
from activities.providers.protocol import AgentLaunch
from activities.providers.runtime.watch_stream import exit_marker_path
from overnight.core.models import RunSpec


def agent_launch(
    spec: RunSpec,
    attempt: int,
    fresh_start: int,
    env: dict[str, str],
    *,
    resumed: int = 0,
    done_round: int = 0,
    ci_round: int = 0,
) -> AgentLaunch:
    start_key = f"{spec.run_id}-{attempt}-{fresh_start}" + (f"-p{resumed}" if resumed else "")
    if done_round:
        start_key += f"-d{done_round}"
    if ci_round:
        start_key += f"-c{ci_round}"
    return AgentLaunch(
        start_key=start_key,
        command=coding.adapter_command(spec) if spec.agent is not None else spec.command,
        cwd=spec.cwd,
        env=env,
        exit_marker=exit_marker_path(spec.checkpoint_path, start_key),
    )
