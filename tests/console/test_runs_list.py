"""The console's runs list in a real headless Chromium, against the session's dev server and
real runs on the local provider: who needs a person comes first, rows change in place as runs
change (server-sent events), and what an agent wrote is shown as text, never as a tag, a link
or a button."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, expect
from temporalio.client import Client

from overnight.cli import client as api
from tests.console.conftest import UI_MS, ConsoleServer, keep_screenshot, needs_chromium, sign_in
from tests.console.runs import console_spec, start_in_state
from tests.live import new_run_id, provider_world

pytestmark = [needs_chromium, pytest.mark.long]

# What a prompt-injected agent writes where the list shows it: a tag, a Markdown link, and a
# label dressed as the console's own button.
SCRIPT = "<script>window.pwned = 1</script>"
LINK = "[open the fix](https://evil.example/steal)"
FAKE_BUTTON = "[Approve]"
HOSTILE = f"{SCRIPT} {LINK} {FAKE_BUTTON}"


@pytest.mark.timeout(300)
async def test_a_run_needing_attention_is_at_the_top_and_rows_change_in_place(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    async with provider_world(dev_client, "local", tmp_path, "console") as (queue, _, runs):
        team = {"owner": "data-team", "labels": ["nightly"], "budget": {"max_spend_usd": 5}}
        running = console_spec(
            new_run_id("c-run"), tmp_path, "sit", env={"CONSOLE_NEXT": "migrate the orders table"}
        )
        asking = console_spec(
            new_run_id("c-ask"),
            tmp_path,
            "ask",
            env={"CONSOLE_QUESTION": "Ship it?", "CONSOLE_NEXT": "ask before shipping"},
            **team,
        )
        stuck = console_spec(
            new_run_id("c-att"),
            tmp_path,
            "crash",
            env={"CONSOLE_NEXT": "fix the flaky test"},
            budget={"max_restarts": 0, "max_spend_usd": 2},
            owner="night-team",
        )
        runs.extend(spec.run_id for spec in (running, asking, stuck))
        await start_in_state(dev_client, queue, running, "running")
        await start_in_state(dev_client, queue, asking, "waiting_for_answer")
        await start_in_state(dev_client, queue, stuck, "needs_attention")

        page = await sign_in(browser, console, console.operator_token)
        rows = page.locator("table.runs tr.run")
        # The list reads a shared snapshot, a poll old at most: each row reaches its group.
        for spec, group in ((stuck, "attention"), (asking, "waiting"), (running, "running")):
            await expect(page.locator(f"#rows-{group} #run-{spec.run_id}")).to_have_count(
                1, timeout=UI_MS
            )
        order = [await row.get_attribute("id") for row in await rows.all()]
        ours = [order.index(f"run-{spec.run_id}") for spec in (stuck, asking, running)]
        assert ours == sorted(ours), f"attention, waiting, running expected in order: {order}"
        # The first row of the whole list needs a person, whoever else is in the namespace.
        assert await rows.first.get_attribute("data-group") == "attention"
        await expect(page.locator(f"#rows-attention #run-{stuck.run_id}")).to_contain_text(
            "needs attention", timeout=UI_MS
        )
        await expect(page.locator(f"#rows-waiting #run-{asking.run_id}")).to_contain_text(
            "Ship it?", timeout=UI_MS
        )
        keep_screenshot("console_runs.png", await page.screenshot(full_page=False))

        # Answered, the run leaves the waiting group on the open page: no reload.
        await api.answer_question(dev_client, asking.run_id, "yes")
        await expect(page.locator(f"#rows-waiting #run-{asking.run_id}")).to_have_count(
            0, timeout=UI_MS
        )
        await expect(page.locator(f"#rows-ended #run-{asking.run_id}")).to_contain_text(
            "finished", timeout=UI_MS
        )

        # A filter is a GET parameter: only what it keeps is listed.
        await page.goto(f"{console.url}/?state=attention")
        await expect(page.locator(f"#run-{stuck.run_id}")).to_be_visible(timeout=UI_MS)
        await expect(page.locator(f"#run-{running.run_id}")).to_have_count(0, timeout=UI_MS)


@pytest.mark.timeout(300)
async def test_what_an_agent_wrote_is_shown_as_text_never_as_markup(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    async with provider_world(dev_client, "local", tmp_path, "console") as (queue, _, runs):
        spec = console_spec(
            new_run_id("c-bad"),
            tmp_path,
            "ask",
            env={
                "CONSOLE_NEXT": HOSTILE,
                "CONSOLE_NOTE": HOSTILE,
                "CONSOLE_QUESTION": f"Approve? {HOSTILE}",
                "CONSOLE_CHOICES": "Approve|<b>no</b>",
            },
        )
        runs.append(spec.run_id)
        await start_in_state(dev_client, queue, spec, "waiting_for_answer")

        page = await sign_in(browser, console, console.operator_token)
        row = page.locator(f"#run-{spec.run_id}")
        await expect(row.locator(".next-step")).to_have_text(HOSTILE, timeout=UI_MS)
        await expect(row.locator(".question")).to_have_text(f"Approve? {HOSTILE}", timeout=UI_MS)
        await expect(row.locator(".choices")).to_contain_text("<b>no</b>", timeout=UI_MS)
        # No tag it wrote became an element: no script ran, no link or button was made.
        assert await page.evaluate("typeof window.pwned") == "undefined"
        assert await row.locator("script, b").count() == 0
        assert await page.locator("a[href*='evil.example']").count() == 0
        assert await page.locator("table.runs button").count() == 0
        # Its links are the console's own: the run's page, nothing else.
        hrefs = [await a.get_attribute("href") for a in await row.locator("a").all()]
        assert hrefs == [f"/runs/{spec.run_id}"]
