"""A run's page in a real headless Chromium (the system's, through Playwright), served by the
real console app under uvicorn against the session's dev server, with real runs on the local
provider (a worker in this process, real agent processes in bubblewrap sandboxes).

Acting from the page reaches the run through the same updates and signals as the CLI: an
answer button's choice is what the agent's `ask()` returns; an extension wakes a run paused
for its spend; a cancel ends the run, its reason on the timeline; a rewind is taken. An agent
that writes a `<script>`, a Markdown link and a fake "Approve" button into its notes and its
question gets them shown as text: no script runs, no link or button of its own appears. A
screenshot of the page is kept (tests/artifacts/console_run.png, and docs/images/ for the docs).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect
from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.core.models import Budget, BudgetExtension, RunSpec
from overnight.demo.sample_demo import make_origin
from overnight.worker.devserver import DevServer
from tests.console.conftest import ConsoleServer, keep_screenshot, needs_chromium, start_console
from tests.e2e.helpers import wait_for_status
from tests.e2e.test_asking import asking_spec
from tests.e2e.test_codec import KEY_A, codec_client, codec_worker
from tests.e2e.test_workspace_kept import workspace_spec
from tests.live import history_text, new_run_id, nothing_left_running, provider_world

# Caps on waiting for an event, not bounds asserted: a loaded machine may take long.
UI_MS = 60_000
CAP = 120.0

# Writes a file and its notes, checkpoints, holds a moment (the run keeps the workspace),
# then asks QUESTION (with CHOICES, a JSON list, when given) and hands the answer over.
CONSOLE_AGENT = """\
import json, os, pathlib, time
from overnight_agent import Checkpoint, ask, finish
cp = Checkpoint.load()
if cp.step < 1:
    cp.step = 1
    for note in json.loads(os.environ.get("NOTES", "[]")):
        cp.note(note)
    cp.next = os.environ.get("NEXT", "ask a person")
    greeting = 'def greet(name: str) -> str:\\n    \"\"\"Say hello.\"\"\"\\n'
    pathlib.Path("greet.py").write_text(greeting + '    return f"Hello, {name}!"\\n')
    cp.save()
    print("wrote greet.py; waiting for the workspace to be kept", flush=True)
    time.sleep(float(os.environ.get("HOLD", "3")))
print(os.environ.get("SAY", "asking a person"), flush=True)
answer = ask(os.environ["QUESTION"], json.loads(os.environ.get("CHOICES", "[]")) or None)
cp.step = 2
cp.note(f"answered: {answer}")
cp.next = "done"
cp.save()
finish("asked and answered", {"answer": answer})
"""

SCRIPT = "<script>window.__pwned = 1</script>"
LINK = "[Approve](https://evil.example/approve)"
FAKE_BUTTON = "<button>Approve</button>"
HOSTILE = f"{SCRIPT} {LINK} {FAKE_BUTTON}"

pytestmark = needs_chromium


async def open_run(
    browser: BrowserContext, console: ConsoleServer, run_id: str, *, reader: bool = False
) -> Page:
    """The run's page, seen with the operator's token (or a reader's)."""
    page = await browser.new_page()
    token = console.read_token if reader else console.operator_token
    await page.set_extra_http_headers({"Authorization": f"Bearer {token}"})
    await page.goto(f"{console.url}/runs/{run_id}")
    return page


@asynccontextmanager
async def started(dev_client: Client, root: Path, spec: RunSpec) -> AsyncIterator[None]:
    """`spec`'s run started on a worker of this process (local sandboxes); on leaving, the
    run terminated if still open and its sandboxes stopped (`provider_world`)."""
    async with provider_world(dev_client, "local", root, "console") as (queue, _, runs):
        runs.append(spec.run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        yield


async def open_when(
    dev_client: Client,
    browser: BrowserContext,
    console: ConsoleServer,
    run_id: str,
    ready: Callable[[Any], bool],
) -> Page:
    """The run's page (the operator's), opened once its status is `ready`."""
    await wait_for_status(dev_client, run_id, ready, timeout=CAP)
    return await open_run(browser, console, run_id)


def console_spec(root: Path, run_id: str, **env: str) -> RunSpec:
    agent = root / "console-agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "main.py").write_text(CONSOLE_AGENT)
    files = make_origin(root / run_id)
    return RunSpec(
        run_id=run_id,
        **origin_fields(files.origin, "local"),
        agent_dir=str(agent),
        command="python3 /workspace/agent/main.py",
        env=env,
        poll_seconds=1,
        stall_seconds=60,
        sandbox_timeout_seconds=300,
        keep_workspace=True,
    )


def waiting(status: Any) -> bool:
    return (
        status.state == "waiting_for_answer"
        and status.talk is not None
        and bool(status.talk.question)
    )


@pytest.mark.timeout(300)
async def test_clicking_an_answer_button_reaches_the_agent_and_the_page_says_it_was_taken(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    run_id = new_run_id("console-answer")
    spec = console_spec(
        tmp_path,
        run_id,
        QUESTION="Ship the new greeting to production?",
        CHOICES=json.dumps(["ship it", "hold"]),
        NOTES=json.dumps(["wrote greet.py with a docstring", "tests pass locally"]),
        NEXT="ship the greeting",
    )
    async with started(dev_client, tmp_path, spec):
        page = await open_when(dev_client, browser, console, run_id, waiting)
        answer = page.locator("form.answer button.choice", has_text="ship it")
        await expect(answer).to_be_visible(timeout=UI_MS)
        # The page's parts, for the screenshot: the diff of the kept step, the output.
        await expect(page.locator("#diff")).to_contain_text("greet.py", timeout=UI_MS)
        await expect(page.locator("#run-output")).to_contain_text("attempt 1", timeout=UI_MS)
        keep_screenshot("console_run.png", await page.screenshot(full_page=True))

        await answer.click()
        await expect(page.locator("#notice")).to_have_text(
            "The run took your answer: its agent goes on with it.", timeout=UI_MS
        )
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
        # The page follows the run by itself: its end reaches the facts and the output.
        await expect(page.locator("#run-facts .state")).to_have_text("finished", timeout=UI_MS)
        await expect(page.locator("#run-output")).to_contain_text(
            f"=== run {run_id} ended: finished ===", timeout=UI_MS
        )
        # The question's time on the timeline, from the history's pause and wake.
        question = page.locator("svg.timeline g.tl-question title")
        await expect(question).to_contain_text("question q1-", timeout=UI_MS)
        await expect(page.locator("details.moments")).to_contain_text(
            "answered: ship it", timeout=UI_MS
        )

    assert result.outcome == "finished"
    assert result.outputs is not None and result.outputs.values == {"answer": "ship it"}


@pytest.mark.timeout(300)
async def test_an_extension_from_the_page_wakes_a_run_paused_for_its_spend(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    run_id = new_run_id("console-extend")
    spec = asking_spec(
        run_id,
        tmp_path,
        "local",
        env={"AGENT_MODE": "spend", "AGENT_SPEND_USD": "2"},
        budget=Budget(max_spend_usd=1.0),
    )
    async with started(dev_client, tmp_path, spec):
        page = await open_when(
            dev_client, browser, console, run_id, lambda s: s.state == "needs_attention"
        )
        await expect(page.locator(".attention")).to_contain_text(
            "spend budget used up", timeout=UI_MS
        )
        await page.fill("form.extend input[name=spend_usd]", "5")
        await page.click("form.extend button[type=submit]")
        await expect(page.locator("#notice")).to_have_text(
            "The run took the extension and goes on.", timeout=UI_MS
        )
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)

    assert (result.outcome, result.attempts, result.restarts) == ("finished", 1, 0)


@pytest.mark.timeout(300)
async def test_a_cancel_from_the_page_ends_the_run_and_its_reason_is_on_the_timeline(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    run_id = new_run_id("console-cancel")
    spec = console_spec(tmp_path, run_id, QUESTION="Which database?", HOLD="0")
    async with started(dev_client, tmp_path, spec):
        page = await open_when(dev_client, browser, console, run_id, waiting)
        # A question without choices is answered in a text field.
        await expect(page.locator("form.answer textarea[name=answer]")).to_be_visible(timeout=UI_MS)
        page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await page.fill("form.cancel input[name=reason]", "wrong branch")
        await page.click("form.cancel button[type=submit]")
        await expect(page.locator("#notice")).to_have_text(
            "The run took the cancel: it is ending.", timeout=UI_MS
        )
        result = await asyncio.wait_for(api.wait_result(dev_client, run_id), timeout=CAP)
        await page.reload()
        await expect(page.locator("details.moments")).to_contain_text(
            "cancelled: wrong branch", timeout=UI_MS
        )

    assert result.outcome == "cancelled"


@pytest.mark.timeout(300)
async def test_a_rewind_to_a_kept_step_from_the_page_is_taken(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    run_id = new_run_id("console-rewind")
    env = {"STEPS": "3", "HOLD": "0.5", "WAIT_AT_END": "120"}
    spec = workspace_spec(tmp_path, run_id, env=env, waits_for_keeps=True)
    async with started(dev_client, tmp_path, spec):

        def three_kept(status: Any) -> bool:
            kept = status.workspace.kept if status.workspace else []
            return [k.outcome for k in kept] == ["pushed"] * 3

        page = await open_when(dev_client, browser, console, run_id, three_kept)
        # The diff of each kept step is that step's own work, as `overnight diff --step N`
        # shows it: step 3 holds its one file, not the two before it.
        await expect(page.locator("#diff")).to_contain_text("step-3.txt", timeout=UI_MS)
        await expect(page.locator("#diff details.diff-file")).to_have_count(1, timeout=UI_MS)
        await expect(page.locator("#diff")).not_to_contain_text("step-2.txt", timeout=UI_MS)
        await page.click("nav.steps a:text-is('1')")
        await expect(page.locator("#diff details.diff-file")).to_have_count(1, timeout=UI_MS)
        await expect(page.locator("#diff")).to_contain_text("step-1.txt", timeout=UI_MS)
        page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await page.select_option("form.rewind select[name=to]", "1")
        await page.click("form.rewind button[type=submit]")
        await expect(page.locator("#notice")).to_have_text(
            "The run took the rewind: a new sandbox starts from that step.", timeout=UI_MS
        )
        status = await api.get_status(dev_client, run_id)

    assert status.workspace is not None and status.workspace.rewinds == 1


@pytest.mark.timeout(300)
async def test_an_agents_script_link_and_fake_button_show_as_text_and_readers_cannot_act(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    run_id = new_run_id("console-hostile")
    spec = console_spec(
        tmp_path,
        run_id,
        QUESTION=f"Proceed? {HOSTILE}",
        CHOICES=json.dumps(["yes", "no"]),
        NOTES=json.dumps(["looked around", HOSTILE]),
        NEXT=HOSTILE,
        HOLD="0",
        SAY=f"{SCRIPT} \x1b[2J\x1b]0;owned\x07 {FAKE_BUTTON}",
    )
    async with started(dev_client, tmp_path, spec):
        page = await open_when(dev_client, browser, console, run_id, waiting)
        await expect(page.locator(".question-text")).to_have_text(
            f"Proceed? {HOSTILE}", timeout=UI_MS
        )
        notes = page.locator("ol.notes li")
        await expect(notes).to_have_text(["looked around", HOSTILE], timeout=UI_MS)
        await expect(page.locator(".next-step")).to_have_text(HOSTILE, timeout=UI_MS)
        # Its output too: the terminal's escapes shown as such, the tags as text.
        await expect(page.locator("#run-output")).to_contain_text(
            f"{SCRIPT} \\x1b[2J\\x1b]0;owned\\x07 {FAKE_BUTTON}", timeout=UI_MS
        )
        assert await page.evaluate("window.__pwned") is None
        assert await page.locator("a[href*='evil.example']").count() == 0
        # The only buttons of the answer form are the agent's two choices, as their text.
        choices = page.locator("form.answer button")
        assert await choices.all_inner_texts() == ["yes", "no"]
        assert await page.locator("button", has_text="Approve").count() == 0

        reader = await open_run(browser, console, run_id, reader=True)
        await expect(reader.locator(".question-text")).to_have_text(
            f"Proceed? {HOSTILE}", timeout=UI_MS
        )
        assert await reader.locator("form").count() == 0
        # The operator's token without the CSRF token, and a reader's token with one: refused.
        cancel = f"{console.url}/runs/{run_id}/cancel"
        as_operator = {"Authorization": f"Bearer {console.operator_token}"}
        refused = await page.request.post(cancel, form={"reason": "x"}, headers=as_operator)
        token = await page.locator("form.cancel input[name=csrf]").get_attribute("value")
        as_reader = await page.request.post(
            cancel,
            form={"reason": "x", "csrf": token or ""},
            headers={"Authorization": f"Bearer {console.read_token}"},
        )
        missing = await page.request.get(f"{console.url}/runs/{run_id}-not", headers=as_operator)
        status = await api.get_status(dev_client, run_id)

    assert (refused.status, as_reader.status) == (403, 403)
    assert missing.status == 404 and f"no run &#39;{run_id}-not&#39;" in await missing.text()
    assert status.state == "waiting_for_answer"


@pytest.mark.timeout(300)
async def test_an_encrypted_runs_page_is_decoded_by_the_console_history_and_all(
    dev_server: DevServer, dev_client: Client, browser: BrowserContext, tmp_path: Path
) -> None:
    run_id = new_run_id("console-codec")
    question = f"Decode me {uuid.uuid4().hex[:8]}?"
    spec = console_spec(tmp_path, run_id, QUESTION=question, CHOICES='["yes", "no"]', HOLD="0")
    with_key = await codec_client(dev_server, KEY_A)
    queue = f"console-codec-{uuid.uuid4().hex[:8]}"
    async with (
        nothing_left_running(dev_client) as runs,
        codec_worker(with_key, queue),
        start_console(with_key) as served,
    ):
        runs.append(run_id)
        await api.start_run(with_key, spec, task_queue=queue)
        await wait_for_status(with_key, run_id, waiting, timeout=CAP)
        # An extension whose argument the history holds encrypted, as every payload.
        await api.extend_budget_and_wait(with_key, run_id, BudgetExtension(hours=2))
        page = await open_run(browser, served, run_id)
        await expect(page.locator(".question-text")).to_have_text(question, timeout=UI_MS)
        await expect(page.locator("details.moments")).to_contain_text(
            "budget extended: +2 h", timeout=UI_MS
        )
        await page.locator("form.answer button.choice", has_text="yes").click()
        await expect(page.locator("#notice")).to_have_text(
            "The run took your answer: its agent goes on with it.", timeout=UI_MS
        )
        result = await asyncio.wait_for(api.wait_result(with_key, run_id), timeout=CAP)

    assert result.outputs is not None and result.outputs.values == {"answer": "yes"}
    raw = await history_text(dev_client, run_id)
    assert question not in raw and "binary/encrypted" in raw
