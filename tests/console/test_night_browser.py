"""The night (`/night`, `/night.csv`) in a real headless Chromium (the system's, through
Playwright), served by the real console against the session's dev server, with real runs on
the local provider (a worker in this process, real agents in bubblewrap sandboxes): one that
crashes out of its restarts, one waiting for an answer, one cancelled, whose owner is a
`<script>`. The page draws its six charts from one visibility read; the owner is text, no
script runs; the CSV lists the runs with their outcomes. A screenshot is kept
(tests/artifacts/console_night.png, and docs/images/ for the docs).
"""

from __future__ import annotations

import csv
import io
import uuid
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, expect
from temporalio.client import Client

from overnight.cli import client as api
from overnight.core.models import Budget
from tests.console.conftest import ConsoleServer, keep_screenshot, needs_chromium
from tests.console.runs import console_spec, start_in_state
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, provider_world

pytestmark = needs_chromium

UI_MS = 60_000
CAP = 180.0
SCRIPT_OWNER = "<script>window.__pwned=1</script>"


@pytest.mark.timeout(420)
async def test_the_night_draws_the_runs_outcomes_spend_and_restarts_with_hostile_owners_as_text(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    team = f"night-{uuid.uuid4().hex[:6]}"
    crashed = new_run_id("night-crash")
    asking = new_run_id("night-ask")
    cancelled = new_run_id("night-cancel")
    async with provider_world(dev_client, "local", tmp_path, "night") as (queue, _, runs):
        runs += [crashed, asking, cancelled]
        await start_in_state(
            dev_client,
            queue,
            console_spec(
                crashed,
                tmp_path,
                "crash",
                owner=team,
                labels=["nightly"],
                budget=Budget(max_restarts=1),
            ),
            "needs_attention",
            timeout=CAP,
        )
        await start_in_state(
            dev_client,
            queue,
            console_spec(asking, tmp_path, "ask", owner=team, env={"CONSOLE_QUESTION": "Ship?"}),
            "waiting_for_answer",
            timeout=CAP,
        )
        await start_in_state(
            dev_client,
            queue,
            console_spec(cancelled, tmp_path, "sit", owner=SCRIPT_OWNER),
            "running",
            timeout=CAP,
        )
        await api.cancel_run(dev_client, cancelled, "enough for tonight")
        await wait_for_status(
            dev_client, cancelled, lambda status: status.state == "cancelled", timeout=CAP
        )

        page = await browser.new_page()
        await page.set_extra_http_headers({"Authorization": f"Bearer {console.read_token}"})
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: dialogs.append(dialog.message))
        await page.goto(f"{console.url}/night?span=24h")
        await expect(page.locator("h1")).to_have_text("The night", timeout=UI_MS)
        charts = page.locator("svg[role=img]")
        await expect(charts).to_have_count(6, timeout=UI_MS)
        outcomes = await page.locator("#outcomes-desc").text_content() or ""
        for said in ("needs attention", "waiting for answer", "cancelled"):
            assert said in outcomes, outcomes
        restarts = await page.locator("#restarts-desc").text_content() or ""
        assert "crash" in restarts, restarts
        owners = await page.locator("#spend-by-owner-desc").text_content() or ""
        assert team in owners and SCRIPT_OWNER in owners, owners
        # The owner is drawn as its characters: no element of its own, no script run.
        assert await page.locator("svg script").count() == 0
        assert await page.evaluate("window.__pwned") is None
        assert dialogs == []
        shot = await page.screenshot(full_page=True)
        keep_screenshot("console_night.png", shot)

        answer = await page.request.get(
            f"{console.url}/night.csv?span=24h",
            headers={"Authorization": f"Bearer {console.read_token}"},
        )
        assert answer.ok and answer.headers["content-type"].startswith("text/csv")
        table = list(csv.DictReader(io.StringIO(await answer.text())))
        outcome = {line["run_id"]: line["outcome"] for line in table}
        assert outcome[crashed] == "needs_attention"
        assert outcome[asking] == "waiting_for_answer"
        assert outcome[cancelled] == "cancelled"
        by_id = {line["run_id"]: line for line in table}
        assert by_id[crashed]["labels"] == "nightly"
        assert by_id[crashed]["restarts"] == "1"
        # Its figures come from its row (a few seconds of sandbox cost a fraction of a cent).
        assert by_id[crashed]["figures_known"] == "yes"
        assert float(by_id[crashed]["spend_usd"]) >= 0
        assert by_id[cancelled]["owner"] == SCRIPT_OWNER
