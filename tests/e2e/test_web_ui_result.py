"""The Web UI shows what a finished run came to: headless Chromium opens a run that crashed once
and finished, on the real dev server. Its card (User Metadata, current details) says what the
safety net cost and what the agent handed over with `finish()`, and its result shows the
checkpoint parsed (`checkpoint_json`: the agent's structure, its strings unescaped) beside the
contract's `checkpoint` text, and the outputs."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from playwright.async_api import async_playwright, expect
from temporalio.client import Client

from overnight.cli import client as api
from overnight.worker.devserver import DevServer
from tests.e2e.test_retention import crashing_spec
from tests.e2e.test_web_ui import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    UI_TIMEOUT_MS,
    _open_user_metadata,
    pytestmark,  # noqa: F401  (skipped where Chromium is missing)
)
from tests.live import new_run_id

PR_URL = "https://git.example/acme/app/pull/7"
PR = f'{{"pull_request": "{PR_URL}"}}'
SCREENSHOTS = (ARTIFACTS / "web_ui_result.png", ARTIFACTS / "web_ui_safety_net.png")


async def test_web_ui_shows_the_safety_net_on_the_card_and_the_parsed_checkpoint_in_the_result(
    dev_server: DevServer, dev_client: Client, task_queue: str, tmp_path: Path, runs: list[str]
) -> None:
    run_id = new_run_id("webres")
    runs.append(run_id)
    handed = {"AGENT_FINISH_SUMMARY": "fixed the due dates", "AGENT_FINISH_OUTPUTS": PR}
    spec = crashing_spec(run_id, tmp_path, env=handed)
    await api.start_run(dev_client, spec, task_queue=task_queue)
    result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=60)
    assert result.safety_net is not None and result.safety_net.restarts == 1
    assert isinstance(result.checkpoint_json, dict)
    assert result.checkpoint_json["notes"] == ["recovered"]
    assert result.outputs is not None and result.outputs.summary == "fixed the due dates"
    assert result.outputs.values == {"pull_request": PR_URL}
    url = api.web_ui_url(dev_server.ui_url, dev_server.namespace, run_id)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1400},
        )
        try:
            page = await browser.new_page()
            await page.goto(url, timeout=UI_TIMEOUT_MS)
            await expect(page.get_by_role("heading", name=run_id)).to_be_visible(
                timeout=UI_TIMEOUT_MS
            )
            body = page.locator("body")
            try:
                # The result, as the Web UI shows it: the parsed checkpoint is JSON in the
                # document (`"notes": ["recovered"]`), the text field its escaped string.
                await expect(body).to_contain_text("checkpoint_json", timeout=UI_TIMEOUT_MS)
                await expect(body).to_contain_text(
                    re.compile(r'"notes":\s*\[\s*"recovered"\s*\]'), timeout=UI_TIMEOUT_MS
                )
                await expect(body).to_contain_text(re.compile(r'\\"recovered\\"'))
                await expect(body).to_contain_text(PR_URL)
                # The rest of the result (outputs, safety_net) is below the panel's fold.
                maximize = page.locator("button", has=page.locator("title", has_text="Maximize"))
                await maximize.last.click()
                await expect(body).to_contain_text('"safety_net"', timeout=UI_TIMEOUT_MS)
                await expect(body).to_contain_text('"summary": "fixed the due dates"')
            finally:
                await page.screenshot(path=str(SCREENSHOTS[0]), full_page=True)
            await browser.close()
            browser = await playwright.chromium.launch_persistent_context(
                str(tmp_path / "chromium-profile-2"),
                executable_path=str(CHROMIUM),
                args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 1000},
            )
            page = await _open_user_metadata(browser, url, run_id)
            try:
                card = page.frame_locator("iframe#user-metadata-current-details").locator("body")
                await expect(card).to_contain_text(
                    re.compile(r"safety net\s+\$\d+\.\d{4} \([\d.]+% of the sandbox cost\)"),
                    timeout=UI_TIMEOUT_MS,
                )
                await expect(card).to_contain_text("1 restart(s) (1 crashed)")
                await expect(card).to_contain_text("fixed the due dates")
                await expect(card).to_contain_text(PR_URL)
            finally:
                await page.screenshot(path=str(SCREENSHOTS[1]), full_page=True)
        finally:
            await browser.close()
