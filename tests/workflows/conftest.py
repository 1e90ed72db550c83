"""Fixtures of the AgentRun workflow tests: the shared time-skipping server and a fresh world."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fakes.activities import FakeWorld
from overnight.worker import binaries


@pytest.fixture
def client(time_skipping_env: WorkflowEnvironment) -> Client:
    return time_skipping_env.client


@pytest.fixture
def world() -> FakeWorld:
    return FakeWorld()


@pytest_asyncio.fixture(loop_scope="session")
async def private_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of the test's own.

    For tests that change the server (search attributes) or end a workflow while one of its
    activities still runs: the test server then never releases that activity's hold on its
    clock, and time would stop skipping for every later test sharing it.
    """
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=str(binaries.test_server_path()),
    )
    try:
        yield env
    finally:
        await env.shutdown()
