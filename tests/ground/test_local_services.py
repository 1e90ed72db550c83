"""overnight's services declare themselves on this machine, so workers keep their ports out of
specs' host_ports; a declaration left by a process that is gone (or whose pid is reused) is
not believed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from overnight.core.local_services import SERVICES_DIR, Declared, declared_services, start_time


def test_a_declaration_holds_while_its_block_runs(tmp_path: Path) -> None:
    with Declared("codec-server", tmp_path):
        assert declared_services(tmp_path) == {os.getpid(): "codec-server"}
    assert declared_services(tmp_path) == {}


async def test_a_worker_declares_itself_with_async_with(tmp_path: Path) -> None:
    async with Declared("worker", tmp_path):
        with Declared("codec-server", tmp_path):
            assert declared_services(tmp_path) == {os.getpid(): "codec-server, worker"}


def test_a_declaration_of_a_process_gone_or_reborn_is_ignored(tmp_path: Path) -> None:
    folder = tmp_path / SERVICES_DIR
    folder.mkdir()
    me = os.getpid()
    (folder / f"{me}.worker.json").write_text(
        json.dumps({"pid": me, "start": "1", "kind": "worker"})  # another process's start
    )
    (folder / "4194999.worker.json").write_text(
        json.dumps({"pid": 4194999, "start": "1", "kind": "worker"})  # no such process
    )
    (folder / "junk.json").write_text("{")
    assert start_time(me) not in (None, "1")
    assert declared_services(tmp_path) == {}


def test_an_unwritable_state_directory_declares_nothing_and_breaks_nothing(tmp_path: Path) -> None:
    (tmp_path / SERVICES_DIR).write_text("a file where the folder would be")
    with Declared("worker", tmp_path):
        assert declared_services(tmp_path) == {}
