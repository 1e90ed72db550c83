"""The spec's folders as this worker finds them: an `agent_dir` that is not a folder here, or a
`repo` given as a path that leads nowhere, can never be uploaded or cloned, so the run's start
refuses them (`check_spec`) before anything is made, rather than a create failing later.

Read at the start on the worker that runs the check; a run pinned to hosts (`RunSpec.hosts`) is
left to its create, on the host that will hold its sandbox.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from overnight.models import RunSpec

# Said after each: the spec is what must change.
FIX = "fix it and start the run again"


def agent_dir_missing(agent_dir: str) -> str:
    return f"field agent_dir: {agent_dir} is not a folder on this worker ({FIX})"


def missing_paths(spec: RunSpec) -> list[str]:
    """One refusal per path field that leads nowhere on this machine."""
    if spec.hosts:
        return []
    found = []
    if spec.agent is None and not Path(spec.agent_dir).expanduser().is_dir():
        found.append(agent_dir_missing(spec.agent_dir))
    repo = _local_repo_path(spec.repo)
    if repo is not None and not repo.exists():
        found.append(f"field repo: {spec.repo} does not exist on this worker ({FIX})")
    return found


def _local_repo_path(repo: str) -> Path | None:
    """The folder a local `repo` names (a path or a `file://` URL); None for a remote one."""
    if repo.startswith("file://"):
        return Path(urlsplit(repo).path)
    if "://" in repo or ":" in repo.split("/", 1)[0]:
        return None  # a URL, or git's `host:path` form
    return Path(repo).expanduser()
