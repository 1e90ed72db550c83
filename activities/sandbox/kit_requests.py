"""The activity that answers the agent: the answer to its question (or the end of its wait)
written into its sandbox, where the kit's `ask()` / `wait_until()` finds it.

One file per request id (overnight.core.agent_requests.answer_path): the kit reads it only once it
parses whole and names the request, so a half-written file is never taken for an answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity

from activities.errors import activity_errors
from activities.models import ActivityName, AnswerAgentInput
from activities.providers.protocol import SandboxProvider
from overnight.core.agent_requests import answer_path

ProviderGetter = Callable[[str], Awaitable[SandboxProvider]]


class KitRequestActivities:
    def __init__(self, provider: ProviderGetter) -> None:
        self._provider = provider

    def all(self) -> list[Callable[..., Any]]:
        return [self.answer_agent]

    @activity.defn(name=ActivityName.ANSWER_AGENT)
    async def answer_agent(self, input: AnswerAgentInput) -> None:
        provider = await self._provider(input.provider)
        data = json.dumps({"id": input.request_id, "answer": input.answer}).encode()
        with activity_errors():
            await provider.write_file(input.sandbox_id, answer_path(input.request_id), data)
