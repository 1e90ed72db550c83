"""git, run here on a repository that may be hostile (an agent's kept refs and commits, a
person's local origin): none of the repository's hooks run, no `ext::` transport, never a
prompt for a password, and a time limit. Used by `overnight diff` and `rewind`
(overnight/cli/workspace.py) and by the reap of kept workspaces' refs
(overnight/worker/workspace_reaping.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from typing import Any, Literal, overload

# Options every call takes: nothing of the repository runs.
NOTHING_RUNS = ("-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never")
# A repository another user owns (a user's folder, read by root) is trusted as well.
ANY_OWNER = ("-c", "safe.directory=*")


def git_command(*args: str, any_owner: bool = False) -> list[str]:
    return ["git", *NOTHING_RUNS, *(ANY_OWNER if any_owner else ()), *args]


def no_prompt() -> dict[str, str]:
    """This process's environment, with git told never to ask for a password."""
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0"}


@overload
def run_git(
    *args: str,
    cwd: str | None,
    timeout: float,
    any_owner: bool = ...,
    env: Mapping[str, str] | None = ...,
    run_as: tuple[int, int] | None = ...,
    text: Literal[False] = ...,
) -> subprocess.CompletedProcess[bytes]: ...


@overload
def run_git(
    *args: str,
    cwd: str | None,
    timeout: float,
    any_owner: bool = ...,
    env: Mapping[str, str] | None = ...,
    run_as: tuple[int, int] | None = ...,
    text: Literal[True],
) -> subprocess.CompletedProcess[str]: ...


def run_git(
    *args: str,
    cwd: str | None,
    timeout: float,
    any_owner: bool = False,
    env: Mapping[str, str] | None = None,
    run_as: tuple[int, int] | None = None,
    text: bool = False,
) -> subprocess.CompletedProcess[Any]:
    """git `args` in `cwd`, its output captured (`text`: decoded, undecodable bytes replaced);
    the caller reads its exit code. `env`: instead of `no_prompt()`; `run_as`: the uid and gid
    it runs as (the owner of a local origin)."""
    who: dict[str, Any] = {}
    if run_as is not None:
        who = {"user": run_as[0], "group": run_as[1], "extra_groups": []}
    decoded: dict[str, Any] = {"text": True, "errors": "replace"} if text else {}
    return subprocess.run(
        git_command(*args, any_owner=any_owner),
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
        env=no_prompt() if env is None else env,
        **who,
        **decoded,
    )
