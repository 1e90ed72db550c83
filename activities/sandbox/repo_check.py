"""Whether a spec's local `repo` is a git repository on this worker, as a run's start finds it
(`check_spec`): a path that names nothing, or a folder git cannot read as a repository, fails
the run once, before any sandbox is made, with one line naming the field and the fix. Without
this, the sandbox's clone of it failed through the gateway (a 502), a failure its create
retried as if the worker were not ready.

The question is git's own (`git ls-remote`, which reads the repository as a clone would, an
empty one too), asked with no system or global config and the folder trusted for this once,
as the gateway's `git http-backend` serves it (activities/gateway/git_http.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from overnight.core.grants import local_repo_path
from overnight.core.models import RunSpec

# How long git may take to say; a slow disk is not the spec's fault, so past this nothing is said.
GIT_SECONDS = 30.0
FIX = "give the path of a git repository on this worker (`git init` makes one)"


def repo_refusals(spec: RunSpec) -> list[str]:
    """`field repo: ...` when the spec's local repo is no git repository here; empty for a
    remote one, or one that is."""
    written = local_repo_path(spec.repo)
    if written is None:
        return []
    path = Path(written).expanduser()
    if not path.is_absolute():
        return []  # refused before the run starts (a spec built in code has no folder)
    if not path.exists():
        return [f"field repo: {written} does not exist on this worker; {FIX}"]
    if not path.is_dir():
        return [f"field repo: {written} is not a folder; {FIX}"]
    problem = _repository_problem(path)
    if problem is not None:
        return [f"field repo: {written} {problem}; {FIX}"]
    return []


def _repository_problem(path: Path) -> str | None:
    """None when git reads `path` as a repository; else what is wrong, in a few words."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
    }
    git = shutil.which("git") or "git"
    # The folder may be another user's (a root worker's user's): trusted by the upload-pack
    # that reads it, as the gateway's http-backend trusts it (a local clone does not pass `-c`
    # on to the upload-pack it starts).
    upload_pack = f"{git} -c safe.directory=* upload-pack"
    try:
        asked = subprocess.run(
            [git, "ls-remote", f"--upload-pack={upload_pack}", "--heads", "--", str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=GIT_SECONDS,
            cwd="/",
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None  # not known: the clone will say
    if asked.returncode == 0:
        return None
    said = [line.removeprefix("fatal: ") for line in asked.stderr.splitlines() if line.strip()]
    if not said or "does not appear to be a git repository" in said[0]:
        return "is not a git repository"
    return f"cannot be read as a git repository here (git: {said[0][:200]})"
