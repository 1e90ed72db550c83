"""The gateway's books are reaped with their runs and sandboxes (activities/gateway/books.py,
`overnight reap`): a closed or gone run's ledger and stats, a stopped or deleted sandbox's
refusals, nothing of a run still open or of a sandbox running or paused. A gateway that kept a
run's ledger open books into a new one after its reap, counted from nothing; and a sandbox
stopped between two calls is refused at the second however its record was rewritten."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from temporalio.client import WorkflowExecutionStatus

from activities.gateway.books import booked_runs, reap_books, refusals_of, spend_of
from activities.gateway.model_ledger import ModelBook
from activities.gateway.refused import RefusalBook
from activities.gateway.service import Gateway, folder_of, model_token
from fakes.model_api import FakeModelApi, text
from overnight.cli.render import reaped_text
from overnight.worker.reaping import reap_gateway_books_of
from overnight.worker.run_book import RunBook
from tests.activities.test_gateway_model_routes import KEY_ENV, asked, call

LINE = {"usd": 0.25, "request_id": "msg_1"}


def sandbox_record(home: Path, name: str, state: str, run_id: str = "run-open") -> None:
    folder = home / "sandboxes" / name
    folder.mkdir(parents=True, exist_ok=True)
    model = {"upstream": "", "credential_env": "", "run_id": run_id, "cap_usd": None}
    (folder / "sandbox.json").write_text(json.dumps({"state": state, "egress": [], "model": model}))


def books(home: Path) -> tuple[ModelBook, RefusalBook]:
    ledger, refused = ModelBook(folder_of(home)), RefusalBook(folder_of(home))
    for run_id in ("run-open", "run-closed", "run-gone"):
        ledger.book(run_id, LINE)
        ledger.retried(run_id, "529 Overloaded", 1.0)
    ledger.flush()
    for sandbox, state in (
        ("sb-running", "running"),
        ("sb-paused", "paused"),
        ("sb-stopped", "stopped"),
    ):
        sandbox_record(home, sandbox, state)
        refused.count(sandbox, "evil.example")
    refused.count("sb-deleted", "evil.example")  # its record is gone
    refused.flush()
    return ledger, refused


def test_a_closed_or_gone_runs_books_and_an_ended_sandboxs_refusals_are_reaped(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    books(home)
    assert booked_runs(home) == ["run-closed", "run-gone", "run-open"]
    reaped = reap_books(home, lambda run_id: run_id == "run-open")
    assert sorted((r.kind, r.owner) for r in reaped) == [
        ("refused", "sb-deleted"),
        ("refused", "sb-stopped"),
        ("spend", "run-closed"),
        ("spend", "run-gone"),
    ]
    assert all(r.freed_bytes > 0 for r in reaped)
    left = sorted(p.name for p in (folder_of(home) / "spend").iterdir() if p.name[0] != ".")
    assert left == ["run-open.jsonl", "run-open.stats.json"]
    assert spend_of(home, "run-open") == (0.25, 1)
    assert spend_of(home, "run-closed") == (0.0, 0)
    assert refusals_of(home, "sb-running") == refusals_of(home, "sb-paused") == {"evil.example": 1}
    assert refusals_of(home, "sb-stopped") == {}
    assert reap_books(home, lambda run_id: run_id == "run-open") == []  # nothing twice


def test_a_ledger_kept_open_books_into_a_new_one_after_its_reap(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ledger, _ = books(home)
    assert ledger.spent("run-closed") == 0.25
    reap_books(home, lambda run_id: run_id == "run-open")
    assert ledger.spent("run-closed") == 0.0  # a run of the same name starts from nothing
    ledger.book("run-closed", {"usd": 0.5})
    assert spend_of(home, "run-closed") == (0.5, 1)
    assert ledger.spent("run-closed") == 0.5
    ledger.close()


class Book:
    def __init__(self, statuses: dict[str, WorkflowExecutionStatus | None]) -> None:
        self.statuses = statuses

    async def status(self, run_id: str) -> WorkflowExecutionStatus | None:
        return self.statuses.get(run_id)


async def test_overnight_reap_deletes_the_books_no_run_needs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    books(home)
    runs = Book(
        {
            "run-open": WorkflowExecutionStatus.RUNNING,
            "run-closed": WorkflowExecutionStatus.COMPLETED,
        }
    )
    reaped = await reap_gateway_books_of(cast(RunBook, runs), home)
    said = reaped_text(reaped)
    assert "local gateway spend run-closed: deleted: its run is closed; freed" in said
    assert "local gateway spend run-gone: deleted: its run is gone; freed" in said
    assert "local gateway refused sb-stopped: deleted: its sandbox no longer runs" in said
    assert "run-open" not in said and "sb-running" not in said and "sb-paused" not in said
    assert booked_runs(home) == ["run-open"]


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gateway]:
    monkeypatch.setenv(KEY_ENV, "sk-test-key")
    monkeypatch.delenv("OVERNIGHT_MODEL_PRICES", raising=False)
    served = Gateway(tmp_path / "home")
    served.start()
    yield served
    served.stop()


def test_a_sandbox_stopped_between_two_calls_is_refused_at_the_second(gateway: Gateway) -> None:
    """Its record rewritten in place to the same size (`running` and `stopped` are both seven
    letters): the gateway keeps parsed records, and must see it."""
    with FakeModelApi([text("done"), text("done")], honour_stream=True) as fake:
        record = gateway.home / "sandboxes" / "sb-1" / "sandbox.json"
        record.parent.mkdir(parents=True)
        model = {"upstream": fake.anthropic_base_url, "credential_env": KEY_ENV, "run_id": "run-1"}
        running = json.dumps({"state": "running", "egress": [], "model": model})
        record.write_text(running)
        token = model_token(gateway.home, "sb-1")
        assert call(gateway, "anthropic", token, asked("anthropic", False))[0] == 200
        with open(record, "r+") as handle:  # the same inode, the same size
            handle.write(running.replace('"running"', '"stopped"'))
        assert call(gateway, "anthropic", token, asked("anthropic", False))[0] == 401
        assert len(fake.requests()) == 1
