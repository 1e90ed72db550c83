"""Attacks by number on the console, tried for real (the console under uvicorn, spoken to over
plain HTTP from several loopback addresses, 127.0.0.2 and on, as other clients): guessing
tokens from one address or from many, and one reader holding every live stream. The decisions
themselves, on a clock of the test's own, are in test_sign_in_limit.py."""

from __future__ import annotations

import asyncio
import re

from overnight.console import auth
from tests.console.conftest import ConsoleServer
from tests.console.test_console_attacks import Answer, _query, http, open_stream, reader_session
from tests.waits import CAP

# overnight.console.sign_in_limit: PER_ADDRESS, IN_ALL, WINDOW_SECONDS (numbers here, so the
# tests run, and fail, against a console without the bound too).
PER_ADDRESS, IN_ALL, WINDOW_SECONDS = 10, 100, 900
# overnight.console.limits.MAX_STREAMS_PER_READER
PER_READER = 8
JSON = {"Accept": "application/json"}


async def by_token(console: ConsoleServer, token: str, source: str) -> Answer:
    return await http(
        console.url, "/", headers={**JSON, "Authorization": f"Bearer {token}"}, source=source
    )


async def by_form(console: ConsoleServer, token: str, source: str) -> Answer:
    """The sign-in form fetched and sent with `token` from `source`, as a browser there would."""
    form = await http(console.url, "/login", source=source)
    assert form.status == 200, form.status
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    return await http(
        console.url,
        "/login",
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": form.headers["set-cookie"].split(";")[0],
        },
        body=_query(csrf=csrf.group(1), token=token, next="/").encode(),
        source=source,
    )


def session_of(answer: Answer) -> str:
    """The session cookie a sign-in set, as a `Cookie` header's value; '' when none."""
    for part in answer.headers.get("set-cookie", "").split(", "):
        if part.startswith(f"{auth.SESSION_COOKIE}="):
            return part.split(";")[0]
    return ""


def refused_for_a_while(answer: Answer) -> bool:
    wait = answer.headers.get("retry-after", "")
    return answer.status == 429 and wait.isdigit() and 1 <= int(wait) <= WINDOW_SECONDS


async def test_guessing_from_one_address_is_refused_and_nobody_else_is_slowed(
    console: ConsoleServer,
) -> None:
    """Wrong tokens from one address (on the form and as `Bearer`): past the bound its tokens
    are not checked, the right one neither (429 with `Retry-After`, no session). A person who
    signed in from there before stays signed in; another address signs in at once."""
    attacker, other = "127.0.0.2", "127.0.0.1"
    before = await by_form(console, console.read_token, attacker)
    assert before.status == 303 and session_of(before)

    for n in range(PER_ADDRESS):
        guess = f"guess-{n:04d}-of-the-operator-token"
        wrong = await (by_form if n % 2 else by_token)(console, guess, attacker)
        assert wrong.status == 401, (n, wrong.status)

    right = await by_token(console, console.operator_token, attacker)
    assert refused_for_a_while(right), (right.status, right.headers)
    assert "Too many wrong tokens" in right.text
    form = await by_form(console, console.operator_token, attacker)
    assert refused_for_a_while(form), (form.status, form.headers)
    assert not session_of(form)
    assert "Too many wrong tokens" in form.text

    # Signed in before the guessing: still in, from the same address.
    page = await http(
        console.url, "/", headers={**JSON, "Cookie": session_of(before)}, source=attacker
    )
    assert page.status == 200
    # Another address, which has not failed: in at the first try, both ways.
    assert (await by_token(console, console.operator_token, other)).status == 200
    signed = await by_form(console, console.operator_token, other)
    assert signed.status == 303 and session_of(signed)


async def test_many_addresses_guessing_together_reach_a_ceiling(console: ConsoleServer) -> None:
    """Guesses spread over many addresses, each under its own bound: past the ceiling an
    address that has guessed is refused its tokens unchecked (the right one too), one that has
    not still signs in (one guesser locks nobody out), people signed in stay in, and the
    console holds no more failures than its bound however many addresses tried."""
    signed_in = await by_form(console, console.read_token, "127.0.0.1")
    counted = 0
    addresses = IN_ALL // (PER_ADDRESS - 1) + 2
    for n in range(addresses):
        for _ in range(PER_ADDRESS - 1):
            wrong = await by_token(console, f"guess-{n:04d}-spread-out-wide", f"127.0.1.{n + 1}")
            assert wrong.status in (401, 429), wrong.status
            counted += wrong.status == 401
    # Past the ceiling, the last address had its one guess checked, and only that.
    assert counted == IN_ALL + 1

    guesser = await by_token(console, console.operator_token, f"127.0.1.{addresses}")
    assert refused_for_a_while(guesser), (guesser.status, guesser.headers)
    assert "many addresses" in guesser.text
    fresh = await by_token(console, console.operator_token, "127.0.2.1")
    assert fresh.status == 200, fresh.status
    held = getattr(console.context, "sign_ins", None)
    assert held is not None and held.held <= IN_ALL + 1
    page = await http(console.url, "/", headers={**JSON, "Cookie": session_of(signed_in)})
    assert page.status == 200


async def test_one_reader_cannot_take_every_stream(console: ConsoleServer) -> None:
    """One reader (a session, or a token's holder) opening streams without end gets its share
    (429 past it, with `Retry-After`); other readers and the operator still get theirs, and
    the reader gets a place again when one of its streams closes."""
    greedy = reader_session(console)
    held: list[asyncio.StreamWriter] = []
    try:
        for _ in range(PER_READER):
            status, writer = await open_stream(console.url, "/runs/events", cookie=greedy)
            held.append(writer)
            assert status == 200
        for path in ("/runs/events", "/runs/some-run/events"):
            status, writer = await open_stream(console.url, path, cookie=greedy)
            writer.close()
            assert status == 429, path
        for other in (
            {"cookie": reader_session(console)},
            {"token": console.read_token},
            {"token": console.operator_token},
        ):
            status, writer = await open_stream(console.url, "/runs/events", **other)
            held.append(writer)
            assert status == 200, other

        held.pop(0).close()

        async def reopened() -> int:
            while True:  # the console sees the close when its stream notices the reader left
                status, writer = await open_stream(console.url, "/runs/events", cookie=greedy)
                if status == 200:
                    held.append(writer)
                    return status
                writer.close()
                assert status == 429
                await asyncio.sleep(0.2)

        assert await asyncio.wait_for(reopened(), timeout=CAP) == 200
    finally:
        for writer in held:
            writer.close()
