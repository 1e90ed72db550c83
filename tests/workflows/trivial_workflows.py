"""Tiny workflows for the foundation's own tests (kept apart: the workflow sandbox re-imports
the module a workflow lives in, and test modules import things it must not run)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow


class Nap(BaseModel):
    name: str
    hours: float


class NapReport(BaseModel):
    name: str
    slept_seconds: float


@workflow.defn
class Echo:
    @workflow.run
    async def run(self, text: str) -> str:
        return f"echo {text}"


@workflow.defn
class Sleeper:
    """Sleeps durably for `hours`, then reports how much workflow time passed."""

    @workflow.run
    async def run(self, nap: Nap) -> NapReport:
        started = workflow.now()
        await workflow.sleep(timedelta(hours=nap.hours), summary=f"{nap.name} naps")
        return NapReport(name=nap.name, slept_seconds=(workflow.now() - started).total_seconds())
