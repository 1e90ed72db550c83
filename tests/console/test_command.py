"""`overnight console` as a person starts it: the real command in its own process. It refuses,
in one line and before dialling anything, to listen beyond loopback with no one checked; with
no token set it makes one and prints it; it connects as every command does, so with
`OVERNIGHT_CODEC_KEYS` it decodes the run's payloads in its own process (the server holds
only ciphertext) and the page in Chromium shows the decoded run."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, expect
from temporalio.client import Client

from overnight.cli import client as api
from overnight.console.settings import READ_TOKEN_ENV, TOKEN_ENV
from overnight.core.codec import CODEC_KEYS_ENV
from overnight.worker.devserver import DevServer
from tests.console.conftest import UI_MS, ConsoleServer, needs_chromium, sign_in
from tests.console.runs import console_spec, in_state
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_codec import KEY_A, codec_client, codec_worker
from tests.live import history_text, new_run_id

OVERNIGHT = Path(sys.executable).parent / "overnight"
SERVING = re.compile(r"console at (http://127\.0\.0\.1:\d+)/")
MADE_TOKEN = re.compile(r"sign in with this token .*: (\S+)$")
# What the run's checkpoint says, that the server must never see and the page must show.
PLAIN = f"decode me {uuid.uuid4().hex[:8]}"


def without_console_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OVERNIGHT_CONSOLE_")}


def test_a_console_beyond_loopback_with_no_one_checked_is_refused_in_one_line() -> None:
    done = subprocess.run(
        # Nothing listens on port 9: nothing may be dialled before the settings are checked.
        [str(OVERNIGHT), "--address", "127.0.0.1:9", "console", "--address", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=without_console_settings(),
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"overnight: --address 0.0.0.0 is not loopback and no one is checked: set {TOKEN_ENV}"
    )
    assert done.stderr.count("\n") == 1 and done.stdout == ""

    short = subprocess.run(
        [str(OVERNIGHT), "--address", "127.0.0.1:9", "console"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**without_console_settings(), TOKEN_ENV: "letmein"},
    )
    assert short.returncode == 2
    assert short.stderr == (
        f"overnight: {TOKEN_ENV} is 7 characters: use at least 16 (e.g. python3 -c "
        "'import secrets; print(secrets.token_urlsafe(24))')\n"
    )


@asynccontextmanager
async def console_process(
    server: DevServer, environ: Mapping[str, str]
) -> AsyncIterator[tuple[str, list[str]]]:
    """`overnight console --port 0` against `server`; its URL and the lines it printed."""
    process = await asyncio.create_subprocess_exec(
        str(OVERNIGHT),
        "--address",
        server.address,
        "--namespace",
        server.namespace,
        "console",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**without_console_settings(), **environ},
    )
    assert process.stdout is not None
    try:
        first = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        found = SERVING.search(first)
        assert found, f"{first!r}; stderr: {(await process.stderr.read()).decode()!r}"  # type: ignore[union-attr]
        lines = [first]
        if TOKEN_ENV not in environ:
            lines.append((await asyncio.wait_for(process.stdout.readline(), 60)).decode())
        yield found.group(1), lines
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), 60)
    assert code == 0, (await process.stderr.read()).decode()  # type: ignore[union-attr]


@needs_chromium
async def test_with_no_token_set_the_console_makes_one_and_prints_it(
    dev_server: DevServer, browser: BrowserContext
) -> None:
    async with console_process(dev_server, {}) as (url, lines):
        made = MADE_TOKEN.search(lines[1].strip())
        assert made, lines
        served = ConsoleServer(url, made.group(1), "", context=None)  # type: ignore[arg-type]
        page = await sign_in(browser, served, made.group(1))
        await expect(page.locator("header .who")).to_contain_text("(operator)", timeout=UI_MS)


@needs_chromium
@pytest.mark.timeout(240)
async def test_the_console_decodes_an_encrypted_run_in_its_own_process(
    dev_server: DevServer, dev_client: Client, browser: BrowserContext, tmp_path: Path
) -> None:
    run_id = new_run_id("c-codec")
    queue = f"console-codec-{uuid.uuid4().hex[:8]}"
    spec = console_spec(run_id, tmp_path, "sit", env={"CONSOLE_NEXT": PLAIN})
    with_key = await codec_client(dev_server, KEY_A)
    tokens = {TOKEN_ENV: "o" + uuid.uuid4().hex, READ_TOKEN_ENV: "r" + uuid.uuid4().hex}
    async with codec_worker(with_key, queue):
        await api.start_run(with_key, spec, task_queue=queue)
        try:
            await wait_for_status(with_key, run_id, in_state("running"), timeout=90)
            await wait_for_status(
                with_key,
                run_id,
                lambda s: s.checkpoint_summary is not None and s.checkpoint_summary.next == PLAIN,
                timeout=60,
            )
            async with console_process(dev_server, {**tokens, CODEC_KEYS_ENV: KEY_A}) as (url, _):
                served = ConsoleServer(url, tokens[TOKEN_ENV], "", context=None)  # type: ignore[arg-type]
                page = await sign_in(browser, served, tokens[TOKEN_ENV])
                row = page.locator(f"#run-{run_id}")
                await expect(row.locator(".next-step")).to_have_text(PLAIN, timeout=UI_MS)
                await expect(row.locator(".state")).to_have_text("running", timeout=UI_MS)
        finally:
            await api.cancel_run(with_key, run_id, "console codec test over")
            result = await asyncio.wait_for(api.wait_result(with_key, run_id), timeout=60)
            assert result.outcome == "cancelled"
    # The server holds the run's words only as ciphertext: the page's were decoded here.
    raw = await history_text(dev_client, run_id)
    assert PLAIN not in raw and "binary/encrypted" in raw
