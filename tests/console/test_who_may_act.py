"""Who may look and act, in a real headless Chromium against the real console: the login form
signs in and refuses a wrong token; every page carries the strict Content-Security-Policy and
no inline script; an action without the CSRF token, or by a reader, is refused and changes
nothing (while the same action by an operator with the token is taken)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.async_api import APIRequestContext, BrowserContext, expect
from temporalio.client import Client

from overnight.cli import client as api
from overnight.console.render import CONTENT_SECURITY_POLICY
from tests.console.conftest import UI_MS, ConsoleServer, needs_chromium, sign_in
from tests.console.runs import console_spec, start_in_state
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, provider_world

pytestmark = needs_chromium

CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


async def test_the_login_form_signs_in_and_refuses_a_wrong_token(
    console: ConsoleServer, browser: BrowserContext
) -> None:
    page = await browser.new_page()
    answered = await page.goto(f"{console.url}/?state=running")
    assert answered is not None and page.url == f"{console.url}/login?next=/%3Fstate%3Drunning"

    await page.fill("input[name=token]", "not-the-token-of-this-console")
    async with page.expect_response(f"{console.url}/login") as refusal:
        await page.click("button[type=submit]")
    assert (await refusal.value).status == 401
    await expect(page.get_by_role("alert")).to_have_text(
        "That token is not one this console knows.", timeout=UI_MS
    )
    assert await browser.cookies(console.url) == [] or all(
        cookie["name"] != "overnight_console" for cookie in await browser.cookies(console.url)
    )

    await page.fill("input[name=token]", console.read_token)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{console.url}/?state=running")  # back where it was going
    await expect(page.locator("header .who")).to_contain_text("(reader)", timeout=UI_MS)
    session = next(
        c for c in await browser.cookies(console.url) if c["name"] == "overnight_console"
    )
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""  # no script reads it

    await page.click("text=Sign out")
    await page.wait_for_url(f"{console.url}/login")
    await page.goto(f"{console.url}/")
    assert page.url.startswith(f"{console.url}/login")


async def test_every_page_has_the_strict_policy_and_no_inline_script(
    console: ConsoleServer, browser: BrowserContext
) -> None:
    page = await browser.new_page()
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text))
    for path in ("/login", "/static/console.js", "/static/console.css"):
        response = await page.request.get(f"{console.url}{path}")
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        assert response.headers["x-content-type-options"] == "nosniff", path
    page = await sign_in(browser, console, console.operator_token)
    response = await page.goto(f"{console.url}/")
    assert response is not None
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["referrer-policy"] == "no-referrer"
    # Scripts only from files, no inline script, style or event handler.
    scripts = await page.eval_on_selector_all("script", "s => s.map(e => [e.src, e.text])")
    assert scripts and all(
        src.startswith(f"{console.url}/static/") and not text.strip() for src, text in scripts
    )
    assert await page.locator("style, [style]").count() == 0
    handlers = await page.evaluate(
        "[...document.querySelectorAll('*')].flatMap(e => [...e.attributes])"
        ".map(a => a.name).filter(n => n.startsWith('on'))"
    )
    assert handlers == []
    # The page's script ran under the policy (it marks the live stream) and broke no rule.
    await expect(page.locator("body[data-live=on]")).to_have_count(1, timeout=UI_MS)
    assert not [text for text in violations if "Content Security Policy" in text]


@pytest.mark.timeout(240)
async def test_an_action_without_the_csrf_token_or_by_a_reader_is_refused(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    async with provider_world(dev_client, "local", tmp_path, "console") as (queue, _, runs):
        spec = console_spec(new_run_id("c-csrf"), tmp_path, "sit")
        runs.append(spec.run_id)
        await start_in_state(dev_client, queue, spec, "running")
        cancel = f"{console.url}/runs/{spec.run_id}/cancel"

        # An operator's browser session, but the form without its CSRF token.
        page = await sign_in(browser, console, console.operator_token)
        status = await page.evaluate(
            """url => fetch(url, {method: "POST", body: new URLSearchParams({reason: "no"})})
                .then(r => r.status)""",
            cancel,
        )
        assert status == 403
        # A stale or forged token is no better.
        forged = await _post(page.request, cancel, {"reason": "no", "csrf": "forged"})
        assert forged == 403

        # A reader, with a valid CSRF token of its own.
        reader = page.request
        headers = {"authorization": f"Bearer {console.read_token}"}
        token = await _csrf(reader, console, headers)
        refused = await reader.post(
            cancel, form={"reason": "a reader", "csrf": token}, headers=headers, max_redirects=0
        )
        assert refused.status == 403
        assert "may look, not act" in await refused.text()

        run = await api.get_status(dev_client, spec.run_id)
        assert run.state == "running"

        # The same action by the operator with its token is taken: the refusals above were
        # the checks', not a broken route's.
        token = await page.get_attribute("meta[name=csrf-token]", "content")
        assert token is not None
        taken = await _post(page.request, cancel, {"reason": "over", "csrf": token})
        assert taken == 303
        await wait_for_status(
            dev_client, spec.run_id, lambda s: s.state in ("finishing", "cancelled"), timeout=60
        )


async def _post(request: APIRequestContext, url: str, form: dict[str, str]) -> int:
    return (await request.post(url, form=form, max_redirects=0)).status


async def _csrf(request: APIRequestContext, console: ConsoleServer, headers: dict[str, str]) -> str:
    page = await request.get(f"{console.url}/", headers=headers)
    assert page.status == 200
    found = CSRF_META.search(await page.text())
    assert found is not None
    return found.group(1)
