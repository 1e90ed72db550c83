"""Header-based sign-in behind a reverse proxy's SSO, against the real console over HTTP: the
user header counts only from an allowed proxy address, the role comes from the role header or
the operators list, and such a user's actions are checked for role and CSRF like any other.
A request for a name other than loopback's is refused (DNS rebinding)."""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.parse
import urllib.request

from temporalio.client import Client

from overnight.console.settings import (
    OPERATORS_ENV,
    ROLE_HEADER_ENV,
    TOKEN_ENV,
    TRUSTED_PROXIES_ENV,
    USER_HEADER_ENV,
)
from tests.console.conftest import start_console

PROXY = {
    USER_HEADER_ENV: "X-Forwarded-User",
    ROLE_HEADER_ENV: "X-Forwarded-Role",
    OPERATORS_ENV: "alice",
}
CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


async def fetch(
    url: str, headers: dict[str, str], form: dict[str, str] | None = None
) -> tuple[int, str]:
    def call() -> tuple[int, str]:
        body = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(url, data=body, headers=headers)
        try:
            with urllib.request.build_opener(_NoRedirect).open(request, timeout=60) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()

    return await asyncio.to_thread(call)


def who(page: str) -> str:
    found = re.search(r"<span>([^<]*) \((reader|operator)\)</span>", page)
    assert found, page[:500]
    return f"{found.group(1)} ({found.group(2)})"


async def test_a_trusted_proxys_user_header_signs_in_with_its_role(dev_client: Client) -> None:
    async with start_console(dev_client, {**PROXY, TRUSTED_PROXIES_ENV: "127.0.0.1"}) as console:
        as_user = {"x-forwarded-user": "alice"}
        status, page = await fetch(f"{console.url}/", as_user)
        assert (status, who(page)) == (200, "alice (operator)")
        status, page = await fetch(f"{console.url}/", {"x-forwarded-user": "bob"})
        assert (status, who(page)) == (200, "bob (reader)")
        raised = {"x-forwarded-user": "bob", "x-forwarded-role": "operator"}
        assert who((await fetch(f"{console.url}/", raised))[1]) == "bob (operator)"
        lowered = {"x-forwarded-user": "alice", "x-forwarded-role": "reader"}
        assert who((await fetch(f"{console.url}/", lowered))[1]) == "alice (reader)"
        assert (await fetch(f"{console.url}/runs/events", {}))[0] == 401

        # A reader's action is refused whatever its CSRF token; an operator's without one too.
        cancel = f"{console.url}/runs/no-such-run/cancel"
        bobs = CSRF_META.search((await fetch(f"{console.url}/", {"x-forwarded-user": "bob"}))[1])
        assert bobs is not None
        reader = await fetch(cancel, {"x-forwarded-user": "bob"}, {"csrf": bobs.group(1)})
        assert reader[0] == 403 and "may look, not act" in reader[1]
        operator = await fetch(cancel, as_user, {"reason": "no token"})
        assert operator[0] == 403 and "CSRF" in operator[1]
        # Another user's CSRF token is not this one's.
        borrowed = await fetch(cancel, as_user, {"csrf": bobs.group(1)})
        assert borrowed[0] == 403

        # DNS rebinding: another name pointed at this machine gets nothing.
        rebound = await fetch(f"{console.url}/", {**as_user, "host": "evil.example"})
        assert rebound[0] == 400


async def test_the_user_header_from_anywhere_else_is_ignored(dev_client: Client) -> None:
    environ = {**PROXY, TRUSTED_PROXIES_ENV: "10.9.9.9", TOKEN_ENV: "t" * 24}
    async with start_console(dev_client, environ) as console:
        forged = {"x-forwarded-user": "alice", "x-forwarded-for": "10.9.9.9"}
        assert (await fetch(f"{console.url}/runs/events", forged))[0] == 401
        status, page = await fetch(f"{console.url}/", {**forged, "accept": "text/html"})
        assert status == 303  # to the sign-in form: nobody is signed in
        token = {"authorization": f"Bearer {'t' * 24}"}
        assert who((await fetch(f"{console.url}/", token))[1]) == "token (operator)"
