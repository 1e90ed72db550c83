"""The dev server from temporal-dev.yaml: started, answering, reused, stopped by its starter."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.client import Client
from temporalio.worker import Worker

from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES
from overnight.worker.devserver import (
    DevServer,
    DevServerError,
    list_search_attributes,
    server_answers,
    start_or_reuse,
    ui_answers,
)
from tests.conftest import dev_config_on_free_ports, start_dev_server_twice
from tests.workflows.trivial_workflows import Echo


async def registered_search_attributes(client: Client, namespace: str) -> dict[str, str]:
    listed = await list_search_attributes(client, namespace)
    return {
        name: IndexedValueType.Name(kind).removeprefix("INDEXED_VALUE_TYPE_")
        for name, kind in listed.custom_attributes.items()
    }


def expected_kinds(types: dict[str, str]) -> dict[str, str]:
    names = {"Datetime": "DATETIME", "KeywordList": "KEYWORD_LIST"}
    return {name: names.get(kind, kind.upper()) for name, kind in types.items()}


async def test_dev_server_from_yaml_runs_a_workflow_for_a_client(
    dev_server: DevServer, dev_client: Client
) -> None:
    assert dev_server.started_here
    assert dev_server.config.db_file.is_file()  # the persistent SQLite store
    task_queue = f"echo-{uuid.uuid4()}"
    async with Worker(dev_client, task_queue=task_queue, workflows=[Echo]):
        result = await dev_client.execute_workflow(
            Echo.run,
            "hello",
            id=f"echo-{uuid.uuid4()}",
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=30),
        )
    assert result == "echo hello"
    # Its store keeps a write-ahead log (half the server's CPU of the default journal).
    with contextlib.closing(
        sqlite3.connect(f"file:{dev_server.config.db_file}?mode=ro", uri=True)
    ) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_web_ui_answers_200(dev_server: DevServer) -> None:
    assert ui_answers(dev_server.ui_url)


async def test_design_search_attributes_are_registered(
    dev_server: DevServer, dev_client: Client
) -> None:
    registered = await registered_search_attributes(dev_client, dev_server.namespace)
    assert registered.items() >= expected_kinds(SEARCH_ATTRIBUTE_TYPES).items()


async def test_second_start_reuses_the_running_server_and_leaves_it_running(
    dev_server: DevServer,
) -> None:
    again = await start_or_reuse(dev_server.config)
    assert not again.started_here
    assert again.address == dev_server.address
    again.stop()  # not ours to stop
    assert await server_answers(dev_server.address, dev_server.namespace)


async def test_reuse_registers_missing_search_attributes_and_stop_ends_only_the_starter(
    tmp_path: Path,
) -> None:
    full = dev_config_on_free_ports(tmp_path)
    bare = full.with_overrides().model_copy(update={"search_attributes": {}, "ui": False})
    first = await start_or_reuse(bare, stop_with_parent=True)
    try:
        client = await Client.connect(first.address)
        assert SEARCH_ATTRIBUTE_TYPES.keys().isdisjoint(
            await registered_search_attributes(client, first.namespace)
        )
        second = await start_or_reuse(full)
        assert not second.started_here
        registered = await registered_search_attributes(client, first.namespace)
        assert registered.items() >= expected_kinds(SEARCH_ATTRIBUTE_TYPES).items()
        second.stop()
        assert await server_answers(first.address, first.namespace)
    finally:
        first.stop()
    assert not await server_answers(first.address, first.namespace)
    assert "server" in full.log_file.read_text()  # the server's output went to its log file


async def test_port_held_by_another_service_is_a_clear_error(tmp_path: Path) -> None:
    config = dev_config_on_free_ports(tmp_path).model_copy(update={"startup_timeout_seconds": 0.5})

    async def not_temporal(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        writer.close()

    squatter = await asyncio.start_server(not_temporal, "127.0.0.1", config.port)
    async with squatter:
        with pytest.raises(DevServerError, match="in use but no Temporal server answers"):
            await start_or_reuse(config)
    assert not config.db_file.exists()  # nothing was started


async def test_the_session_server_is_started_again_on_other_ports_when_its_first_start_fails(
    tmp_path: Path,
) -> None:
    first = dev_config_on_free_ports(tmp_path / "first")
    second = dev_config_on_free_ports(tmp_path / "second")
    # The first's UI port taken between its draw and its bind (another test process drew it).
    with socket.create_server(("127.0.0.1", first.ui_port)):
        server = await start_dev_server_twice(iter([first, second]))
    try:
        assert server.config.address == second.address
        assert await server_answers(second.address, second.namespace)
    finally:
        server.stop()
    assert not first.db_file.exists()  # the first was never served
