"""Fixtures of the console's tests: the console served for real (uvicorn on a free 127.0.0.1
port, in this process, against the session's dev server) with an operator and a reader token,
and a headless Chromium (the system's, through Playwright; nothing downloaded).

`console` -> `ConsoleServer` (`url`, `operator_token`, `read_token`, `context`);
`start_console(client, environ)` serves one with other settings; `browser` is a fresh
Chromium profile for the test; `sign_in(browser, console, token)` is a page signed in through
the login form.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import BrowserContext, Page, async_playwright
from temporalio.client import Client

from overnight.console.context import ConsoleContext, context_for
from overnight.console.server import ConsoleServer as Server
from overnight.console.settings import READ_TOKEN_ENV, TOKEN_ENV, settings_from
from tests.e2e.test_web_ui import CHROMIUM, CHROMIUM_ARGS

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
DOC_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
# How long a page action or an `expect(...)` waits for what it looks for: a cap, not a bound.
# On a loaded machine a live page takes seconds to show a change (Playwright's default of 5 s
# failed there); a slow machine only makes it slower, never wrong.
UI_MS = 60_000
PAGE_TIMEOUT_MS = UI_MS

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} is missing (scripts/test installs the Debian packages chromium and "
    "chromium-driver)",
)


@dataclass(frozen=True)
class ConsoleServer:
    url: str
    operator_token: str
    read_token: str
    context: ConsoleContext


def tokens() -> dict[str, str]:
    return {TOKEN_ENV: secrets.token_urlsafe(24), READ_TOKEN_ENV: secrets.token_urlsafe(24)}


@asynccontextmanager
async def start_console(
    client: Client, environ: Mapping[str, str] | None = None
) -> AsyncIterator[ConsoleServer]:
    """The console on a free loopback port for the block, as `overnight console` serves it."""
    environ = dict(environ) if environ is not None else tokens()
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    settings = settings_from(environ, address="127.0.0.1", port=port)
    context = context_for(client, settings)
    server = Server(context)
    serving = asyncio.create_task(server.serve_on(sock))
    while not server.started:
        if serving.done():
            serving.result()  # raises why it could not start
        await asyncio.sleep(0.05)
    try:
        yield ConsoleServer(
            url=f"http://127.0.0.1:{port}",
            operator_token=settings.operator_token or "",
            read_token=settings.read_token or "",
            context=context,
        )
    finally:
        server.stop()
        await asyncio.wait_for(serving, timeout=60)
        sock.close()


@pytest_asyncio.fixture(loop_scope="session")
async def console(dev_client: Client) -> AsyncIterator[ConsoleServer]:
    async with start_console(dev_client) as served:
        yield served


@pytest_asyncio.fixture(loop_scope="session")
async def browser(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            viewport={"width": 1500, "height": 1000},
        )
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        try:
            yield context
        finally:
            await context.close()


async def sign_in(browser: BrowserContext, console: ConsoleServer, token: str) -> Page:
    """A page signed in through the login form with `token`, on the runs list."""
    page = await browser.new_page()
    await page.goto(f"{console.url}/")
    await page.fill("input[name=token]", token)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{console.url}/")
    return page


def keep_screenshot(name: str, data: bytes, *, for_docs: bool = True) -> None:
    """`tests/artifacts/<name>` (a CI artefact) and, for the docs, `docs/images/<name>`."""
    for folder in (ARTIFACTS, DOC_IMAGES) if for_docs else (ARTIFACTS,):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
