"""`FakeWorld` that keeps workspaces: each keep records the sandbox's checkpoint file then (as
the real kept commit holds it), answers pushed (or `outcomes[n]`), and a create given a kept
workspace puts it back, a rewind's checkpoint with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.models import ActivityName, AgentStarted, CheckpointRead, CreateSandboxInput
from activities.models.workspace import KeepWorkspaceInput, WorkspaceKeep, WorkspaceRestored
from fakes.activities import FakeWorld
from overnight.core.workspace_spec import KeepOutcome, ref_name

BASE = "b" * 40


def commit_of(number: int) -> str:
    return f"{number:040x}"


class WorkspaceWorld(FakeWorld):
    def __init__(self) -> None:
        super().__init__()
        self.keeps: list[KeepWorkspaceInput] = []
        self.outcomes: dict[int, KeepOutcome] = {}
        # By kept commit: the checkpoint file the sandbox held when it was kept.
        self.kept_files: dict[str, CheckpointRead | None] = {}

    def activities(self) -> list[Callable[..., Any]]:
        return [*super().activities(), self.keep_workspace]

    @activity.defn(name=ActivityName.KEEP_WORKSPACE)
    async def keep_workspace(self, request: KeepWorkspaceInput) -> WorkspaceKeep:
        self.keeps.append(request)
        outcome = self.outcomes.get(request.number, "pushed")
        if outcome != "pushed":
            return WorkspaceKeep(outcome=outcome, bytes=2**30, detail=f"{outcome} (fake)")
        commit = commit_of(request.number)
        self.kept_files[commit] = self._answering(request.sandbox_id).file
        ref = ref_name(request.run_id, request.number)
        return WorkspaceKeep(
            outcome="pushed", ref=ref, commit=commit, bytes=100, has_checkpoint=True
        )

    @activity.defn(name=ActivityName.CREATE_SANDBOX)
    async def create_sandbox(self, request: CreateSandboxInput) -> AgentStarted:
        started = await FakeWorld.create_sandbox(self, request)
        if not request.spec.keep_workspace:
            return started
        more: dict[str, Any] = {"workspace_base": BASE}
        kept = request.workspace
        if kept is not None:
            more["workspace_restored"] = WorkspaceRestored(
                status="restored", checkpoint_written=kept.rewind
            )
            if kept.rewind:
                file = self.kept_files[kept.commit]
                self._answering(started.sandbox_id).file = file
                more["checkpoint_restored"] = file
        return started.model_copy(update=more)
