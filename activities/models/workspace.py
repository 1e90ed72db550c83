"""The models of keeping a run's workspace (activities/workspace/activities.py): one in, one
out, and what a create is told to restore."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.model_base import Provider
from overnight.core.workspace_spec import KeepOutcome


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KeepWorkspaceInput(_Model):
    """Commit the sandbox's workspace to `refs/overnight/<run_id>/<number>` and push it."""

    provider: Provider
    sandbox_id: str
    run_id: str
    repo: str
    # The worker's variable holding `repo`'s credential (RunSpec.repo_credential): its name.
    repo_credential: str = ""
    number: int = Field(ge=1)
    at: datetime
    max_bytes: int = Field(gt=0)
    checkpoint_path: str
    max_checkpoint_bytes: int = Field(gt=0)
    # The latest kept commit: objects it holds are on the remote already (not counted).
    previous: str | None = None
    base: str | None = None


class WorkspaceKeep(_Model):
    outcome: KeepOutcome
    ref: str | None = None
    commit: str | None = None
    bytes: int = 0
    has_checkpoint: bool = False
    seconds: float = 0
    detail: str = ""


class WorkspaceRestore(_Model):
    """What a create puts in its fresh sandbox after the clone: the kept workspace `commit`
    (fetched from `ref`). `rewind`: a person asked for it, so the branch goes back to it even
    when the remote's is further, and the checkpoint comes from it too."""

    ref: str
    commit: str
    rewind: bool = False


class WorkspaceRestored(_Model):
    """What the restore did: `restored`, or why not (`detail`)."""

    status: Literal["restored", "skipped", "failed"]
    detail: str = ""
    # A rewind: the checkpoint file was written from the kept commit.
    checkpoint_written: bool = False
