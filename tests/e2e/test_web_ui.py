"""The Web UI shows a running run: headless Chromium opens the run's page on the real dev server.

Temporal's Web UI puts a workflow's user metadata under the "User Metadata" tab: the static
summary and details, and the current details (our Markdown card). Each is rendered from Markdown
inside its own iframe, whose ids (`user-metadata-summary`, `user-metadata-current-details`) are
what the test looks in. A screenshot of the tab is saved under tests/artifacts/ whatever the
outcome.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, FrameLocator, Page, async_playwright, expect
from temporalio.client import Client

from overnight.cli import client as api
from overnight.core.specs import run_summary
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status
from tests.e2e.test_stock_cli import temporal

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
SCREENSHOT = ARTIFACTS / "web_ui_run.png"
# Nothing in the background talks to the internet; the profile is a fresh empty folder.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
UI_TIMEOUT_MS = 20_000
# The agent sits in its first step and no stall is declared, so the run stays at attempt 1.
SLOW_AGENT = {"AGENT_STEP_DELAY": "120"}

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing (scripts/test installs the Debian packages chromium and "
    "chromium-driver)",
)


async def test_web_ui_shows_the_run_card_and_summary_of_a_running_run(
    dev_server: DevServer,
    dev_client: Client,
    task_queue: str,
    tmp_path: Path,
    runs: list[str],
) -> None:
    run_id = new_run_id("webui")
    runs.append(run_id)
    spec, _ = agent_spec(run_id, tmp_path, agent_env=SLOW_AGENT, stall_seconds=600)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    await wait_for_status(dev_client, run_id, lambda s: s.state == "running" and bool(s.process_id))
    url = api.web_ui_url(dev_server.ui_url, dev_server.namespace, run_id)

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            page = await _open_user_metadata(browser, url, run_id)
            try:
                card = page.frame_locator("iframe#user-metadata-current-details")
                summary = page.frame_locator("iframe#user-metadata-summary")
                await _expect_card(card, run_id)
                await expect(summary.locator("body")).to_contain_text(
                    run_summary(spec), timeout=UI_TIMEOUT_MS
                )
            finally:
                await _save_screenshot(page)
        finally:
            await browser.close()
    assert SCREENSHOT.stat().st_size > 0


async def _open_user_metadata(browser: BrowserContext, url: str, run_id: str) -> Page:
    page = await browser.new_page()
    await page.goto(url, timeout=UI_TIMEOUT_MS)
    # The run page has loaded once its header names the run.
    await expect(page.get_by_role("heading", name=run_id)).to_be_visible(timeout=UI_TIMEOUT_MS)
    await page.get_by_role("tab", name="User Metadata").click(timeout=UI_TIMEOUT_MS)
    await expect(page.get_by_role("heading", name="Current Details")).to_be_visible(
        timeout=UI_TIMEOUT_MS
    )
    return page


async def _expect_card(card: FrameLocator, run_id: str) -> None:
    body = card.locator("body")
    await expect(body).to_contain_text(
        re.compile(rf"overnight run\s+{re.escape(run_id)}\s*:\s*running"), timeout=UI_TIMEOUT_MS
    )
    await expect(body).to_contain_text(re.compile(r"attempt\s+1\b"), timeout=UI_TIMEOUT_MS)
    # Rendered as Markdown, not shown as source: the state and the labels are bold.
    await expect(card.locator("strong", has_text="running")).to_be_visible()
    await expect(card.locator("strong", has_text="attempt")).to_be_visible()


async def _save_screenshot(page: Page) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOT), full_page=True)


async def test_web_ui_shows_a_bad_spec_from_the_stock_cli_as_failed_naming_the_field(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("badspec")
    runs.append(run_id)
    spec, _ = agent_spec(run_id, tmp_path)
    raw = {**spec.model_dump(mode="json"), "secret_env": {"TOKEN": "x"}}
    await temporal(
        dev_server,
        "workflow",
        "start",
        "--type",
        "AgentRun",
        "--task-queue",
        task_queue,
        "--workflow-id",
        run_id,
        "--input",
        json.dumps(raw),
    )
    url = api.web_ui_url(dev_server.ui_url, dev_server.namespace, run_id)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            page = await browser.new_page()
            await page.goto(url, timeout=UI_TIMEOUT_MS)
            await expect(page.get_by_role("heading", name=run_id)).to_be_visible(
                timeout=UI_TIMEOUT_MS
            )
            body = page.locator("body")
            # Failed within seconds, the reason naming the field (the page refreshes itself).
            await expect(body).to_contain_text(re.compile(r"Failed"), timeout=UI_TIMEOUT_MS)
            await expect(body).to_contain_text("field secret_env", timeout=UI_TIMEOUT_MS)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "web_ui_bad_spec.png"), full_page=True)
        finally:
            await browser.close()
