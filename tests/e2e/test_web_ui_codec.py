"""The Web UI decodes an encrypted run through `overnight codec-server`, and shows ciphertext
without it: headless Chromium on real dev servers, one started with `--ui-codec-endpoint`
(temporal-dev.yaml's `ui_codec_endpoint`), the session's without. The stock `temporal` CLI
decodes through the same server (`--codec-endpoint`).

Screenshots go to tests/artifacts/ (web_ui_codec_on.png, web_ui_codec_off.png).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Page, async_playwright, expect
from temporalio.client import Client, WorkflowExecutionStatus

from overnight.cli import client as api
from overnight.cli.codec_server import CodecServer, CodecServerSettings
from overnight.core.codec import data_converter, parse_keys
from overnight.core.specs import run_summary
from overnight.worker.devserver import DevServer, start_or_reuse
from tests.conftest import dev_config_on_free_ports, free_port
from tests.e2e.helpers import agent_spec, new_run_id, wait_for_status
from tests.e2e.test_codec import codec_worker
from tests.e2e.test_stock_cli import temporal
from tests.e2e.test_web_ui import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, UI_TIMEOUT_MS

KEYS = f"web:{base64.b64encode(os.urandom(32)).decode()}"
# The agent sits in its first step: the run stays running at attempt 1.
SLOW_AGENT = {"AGENT_STEP_DELAY": "120"}
BASE64_LINE = re.compile(r'"[A-Za-z0-9+/]{40,}')
CARD = "overnight run {run_id}: running"
COMMAND = "python3 /workspace/agent/main.py --resume /workspace/checkpoint.json"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing")


@pytest.fixture
def codec_port() -> int:
    return free_port()


@pytest_asyncio.fixture(loop_scope="session")
async def codec_dev_server(tmp_path: Path, codec_port: int) -> AsyncIterator[DevServer]:
    """A dev server whose Web UI decodes through the codec server at `codec_port`."""
    config = dev_config_on_free_ports(tmp_path / "codec-dev").with_overrides(
        ui_codec_endpoint=f"http://127.0.0.1:{codec_port}"
    )
    assert "--ui-codec-endpoint" in config.start_dev_args("temporal")
    server = await start_or_reuse(config, stop_with_parent=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def codec_server(codec_dev_server: DevServer, codec_port: int) -> Iterator[CodecServer]:
    settings = CodecServerSettings(
        keyring=parse_keys(KEYS), port=codec_port, origins=(codec_dev_server.ui_url,)
    )
    with CodecServer(settings) as server:
        yield server


def payload_texts(history_json: str) -> str:
    """The data of every payload in a `temporal workflow show --output json`, as text."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if "metadata" in value and isinstance(value.get("data"), str):
                found.append(base64.b64decode(value["data"]).decode("utf-8", "replace"))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(history_json))
    return "\n".join(found)


async def _input_panel(page: Page, url: str, run_id: str) -> str:
    await page.goto(url, timeout=UI_TIMEOUT_MS)
    await expect(page.get_by_role("heading", name=run_id)).to_be_visible(timeout=UI_TIMEOUT_MS)
    await expect(page.get_by_role("heading", name="Input", exact=True)).to_be_visible(
        timeout=UI_TIMEOUT_MS
    )
    return await page.locator("body").inner_text()


async def test_the_web_ui_shows_an_encrypted_run_decoded_through_the_codec_server(
    codec_dev_server: DevServer,
    codec_server: CodecServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="overnight.cli.codec_server")
    client = await Client.connect(
        codec_dev_server.address,
        namespace=codec_dev_server.namespace,
        data_converter=data_converter(parse_keys(KEYS)),
    )
    run_id = new_run_id("webcodec")
    queue = f"webcodec-{uuid.uuid4().hex[:6]}"
    spec, _ = agent_spec(run_id, tmp_path, agent_env=SLOW_AGENT, stall_seconds=600)
    async with codec_worker(client, queue):
        try:
            await api.start_run(client, spec, task_queue=queue)
            await wait_for_status(client, run_id, lambda s: s.state == "running")
            url = api.web_ui_url(codec_dev_server.ui_url, codec_dev_server.namespace, run_id)
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch_persistent_context(
                    str(tmp_path / "chromium-profile"),
                    executable_path=str(CHROMIUM),
                    args=CHROMIUM_ARGS,
                    viewport={"width": 1400, "height": 1000},
                )
                try:
                    page = await browser.new_page()
                    await _input_panel(page, url, run_id)
                    # The start input, the spec, decoded: its command reads as written.
                    body = page.locator("body")
                    await expect(body).to_contain_text(COMMAND, timeout=UI_TIMEOUT_MS)
                    await page.get_by_role("tab", name="User Metadata").click()
                    summary = page.frame_locator("iframe#user-metadata-summary")
                    await expect(summary.locator("body")).to_contain_text(
                        run_summary(spec), timeout=UI_TIMEOUT_MS
                    )
                    # The card is a query's answer, encrypted by the worker: decoded too.
                    card = page.frame_locator("iframe#user-metadata-current-details")
                    await expect(card.locator("body")).to_contain_text(
                        CARD.format(run_id=run_id), timeout=UI_TIMEOUT_MS
                    )
                    ARTIFACTS.mkdir(parents=True, exist_ok=True)
                    await page.screenshot(
                        path=str(ARTIFACTS / "web_ui_codec_on.png"), full_page=True
                    )
                finally:
                    await browser.close()
            # The stock CLI decodes through it too (`--codec-endpoint`), and not without it.
            show = ("workflow", "show", "-w", run_id, "--output", "json")
            decoded = await temporal(codec_dev_server, *show, "--codec-endpoint", codec_server.url)
            assert COMMAND in payload_texts(decoded)
            assert COMMAND not in payload_texts(await temporal(codec_dev_server, *show))
            # The codec server logs each call it answers (never a payload).
            answered = [r.getMessage() for r in caplog.records if "POST /decode" in r.getMessage()]
            assert answered and all('" 200 ' in line for line in answered), answered
        finally:
            handle = client.get_workflow_handle(run_id)
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await api.cancel_run(client, run_id, "test over")
                await api.wait_result(client, run_id)


async def test_without_a_codec_server_the_web_ui_shows_only_ciphertext(
    dev_server: DevServer, tmp_path: Path, runs: list[str]
) -> None:
    client = await Client.connect(
        dev_server.address,
        namespace=dev_server.namespace,
        data_converter=data_converter(parse_keys(KEYS)),
    )
    run_id = new_run_id("webcipher")
    runs.append(run_id)
    queue = f"webcipher-{uuid.uuid4().hex[:6]}"
    spec, _ = agent_spec(run_id, tmp_path, agent_env=SLOW_AGENT, stall_seconds=600)
    async with codec_worker(client, queue):
        await api.start_run(client, spec, task_queue=queue)
        await wait_for_status(client, run_id, lambda s: s.state == "running")
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
                await _input_panel(page, url, run_id)
                body = page.locator("body")
                # The input as stored: the ciphertext, as base64, wrapped over lines.
                await expect(body).to_contain_text(BASE64_LINE, timeout=UI_TIMEOUT_MS)
                text = await body.inner_text()
                await page.get_by_role("tab", name="User Metadata").click()
                await expect(body).to_contain_text("No summary available", timeout=UI_TIMEOUT_MS)
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(ARTIFACTS / "web_ui_codec_off.png"), full_page=True)
                text += await body.inner_text()
                for frame in page.frames:
                    text += await frame.locator("body").inner_text()
            finally:
                await browser.close()
        await api.cancel_run(client, run_id, "test over")
        await api.wait_result(client, run_id)
    shown = re.search(r'"([A-Za-z0-9+/=\s]{100,})"', text)
    assert shown is not None, text
    ciphertext = base64.b64decode(re.sub(r"\s", "", shown.group(1)), validate=True)
    assert len(ciphertext) > len(COMMAND)
    for plain in (COMMAND, run_summary(spec), CARD.format(run_id=run_id)):
        assert plain not in text
