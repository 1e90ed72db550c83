"""The worker asks the namespace for its search attributes once, not once per run."""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.models import SearchAttributeCheckInput
from activities.sandbox.activities import SandboxActivities
from activities.sandbox.search_attributes import SearchAttributeCache
from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES


async def test_runs_started_together_share_one_lookup(dev_client: Client) -> None:
    cache = SearchAttributeCache(dev_client)
    answers = await asyncio.gather(*(cache.present() for _ in range(50)))
    assert all(answer == list(SEARCH_ATTRIBUTE_TYPES) for answer in answers)
    assert cache.lookups == 1
    assert await cache.present() == list(SEARCH_ATTRIBUTE_TYPES)
    assert cache.lookups == 1


async def test_the_answer_is_asked_again_after_its_ttl(dev_client: Client) -> None:
    cache = SearchAttributeCache(dev_client, ttl=0.0)
    await cache.present()
    await cache.present()
    assert cache.lookups == 2


async def test_the_activity_answers_from_the_workers_cache(dev_client: Client) -> None:
    acts = SandboxActivities(dev_client)
    env = ActivityEnvironment()
    for _ in range(3):
        found = await env.run(acts.check_search_attributes, SearchAttributeCheckInput())
        assert found.present == list(SEARCH_ATTRIBUTE_TYPES)
    assert acts._search_attributes.lookups == 1
