"""The bounds on wrong tokens (overnight/console/sign_in_limit.py) and on one reader's event
streams (overnight/console/limits.py), decided without a server and on a clock of the test's
own: a window's end is a number the test sets, never a wait."""

from __future__ import annotations

import asyncio

import pytest
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from overnight.console.limits import ReadersStream, ReaderStreams
from overnight.console.sign_in_limit import (
    HELD,
    IN_ALL,
    PER_ADDRESS,
    WINDOW_SECONDS,
    Refusal,
    SignInLimiter,
    address_key,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def guess(limiter: SignInLimiter, address: str) -> Refusal | None:
    """A wrong token from `address` as the console takes it: refused, or checked and counted."""
    refused = limiter.refusal(address)
    if refused is None:
        limiter.failed(address)
    return refused


def test_an_address_is_refused_past_its_failures_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    limiter = SignInLimiter(clock)
    for _ in range(PER_ADDRESS):
        assert guess(limiter, "203.0.113.7") is None
        clock.now += 10
    assert limiter.refusal("203.0.113.7") == Refusal(int(WINDOW_SECONDS) - 100, "address")
    # Refused tokens are not counted: the wait does not grow with the tries.
    for _ in range(1000):
        assert guess(limiter, "203.0.113.7") is not None
    assert limiter.refusal("203.0.113.7") == Refusal(int(WINDOW_SECONDS) - 100, "address")
    # Another address that has not failed is checked as ever (a right token goes straight in).
    assert limiter.refusal("203.0.113.8") is None
    # The first failure leaves the window: one more try, then refused again.
    clock.now = 1000.0 + WINDOW_SECONDS
    assert guess(limiter, "203.0.113.7") is None
    assert limiter.refusal("203.0.113.7") == Refusal(10, "address")
    clock.now += 10 * PER_ADDRESS + WINDOW_SECONDS
    assert limiter.refusal("203.0.113.7") is None and limiter.held == 0


def test_past_the_ceiling_each_address_has_one_guess_a_window() -> None:
    """An attacker with many addresses, each under its own bound: past `IN_ALL` failures in
    the window an address that has failed is refused, one that has not is checked once."""
    clock = Clock()
    limiter = SignInLimiter(clock)
    per_address = PER_ADDRESS - 1
    addresses = [f"198.51.100.{n}" for n in range(IN_ALL // per_address + 1)]
    failures = 0
    for address in addresses:
        for _ in range(per_address):
            if guess(limiter, address) is None:
                failures += 1
        clock.now += 1
    # The last address was refused once the ceiling was reached, after its first guesses.
    assert failures == IN_ALL
    refused = limiter.refusal(addresses[0])
    assert refused is not None and refused.whose == "everyone"
    # Checked again once the ceiling's oldest failure leaves the window.
    assert refused.retry_after == int(WINDOW_SECONDS) - len(addresses)
    assert guess(limiter, "192.0.2.1") is None  # its one guess
    assert limiter.refusal("192.0.2.1") == Refusal(int(WINDOW_SECONDS) - len(addresses), "everyone")
    clock.now = 1000.0 + WINDOW_SECONDS  # the first address's failures leave the window
    assert limiter.refusal(addresses[-1]) is None


def test_one_guesser_past_the_ceiling_locks_nobody_else_out() -> None:
    """Failures from everyone past `IN_ALL` refuse only the addresses that failed: a person who
    has not mistyped signs in at the first try."""
    clock = Clock()
    limiter = SignInLimiter(clock)
    for n in range(IN_ALL * 3):
        guess(limiter, f"198.51.100.{n % 50}")
    assert limiter.refusal("192.0.2.1") is None
    assert limiter.refusal("198.51.100.7") is not None


def test_past_the_failures_held_every_token_is_refused_until_they_age() -> None:
    """A guesser with more addresses than `HELD`: one guess each, then every address is
    refused (people signed in stay in) until the oldest failure leaves the window."""
    clock = Clock()
    limiter = SignInLimiter(clock)
    for n in range(HELD):
        assert guess(limiter, f"10.0.{n >> 8}.{n & 255}") is None
    refused = limiter.refusal("192.0.2.1")
    assert refused == Refusal(int(WINDOW_SECONDS), "everyone")
    clock.now += WINDOW_SECONDS
    assert limiter.refusal("192.0.2.1") is None


def test_memory_is_bounded_whatever_the_number_of_addresses() -> None:
    """100,000 addresses (IPv4 and IPv6, each in its own /64) guessing: the limiter holds at
    most `HELD` failures, even when told of failures it would have refused."""
    clock = Clock()
    limiter = SignInLimiter(clock)
    for n in range(100_000):
        v4 = f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"
        address = v4 if n % 2 else f"2001:db8:{n >> 16:x}:{n & 0xFFFF:x}::1"
        guess(limiter, address)
        limiter.failed(address)  # a caller that forgot to ask first
        clock.now += 0.001
    assert limiter.held <= HELD
    assert len(limiter._failures) <= HELD
    assert sum(len(times) for times in limiter._by_address.values()) <= HELD


def test_an_ipv6_prefix_counts_as_one_address() -> None:
    """An IPv6 host has its /64 to choose addresses from: they count together."""
    limiter = SignInLimiter(Clock())
    for n in range(PER_ADDRESS):
        assert guess(limiter, f"2001:db8:1:2::{n + 1:x}") is None
    assert limiter.refusal("2001:db8:1:2:ffff::9") is not None
    assert limiter.refusal("2001:db8:1:3::1") is None
    assert address_key("::ffff:192.0.2.5") == "192.0.2.5"
    assert address_key("192.0.2.5") == "192.0.2.5"
    assert address_key("") == ""


def test_retry_after_is_at_least_a_second() -> None:
    clock = Clock()
    limiter = SignInLimiter(clock, per_address=1)
    guess(limiter, "192.0.2.9")
    clock.now += WINDOW_SECONDS - 0.25
    assert limiter.refusal("192.0.2.9") == Refusal(1, "address")


def test_a_reader_holds_at_most_its_share_of_streams() -> None:
    streams = ReaderStreams(most=3)
    assert all(streams.take("s:a") for _ in range(3))
    assert not streams.take("s:a")
    assert streams.take("s:b")  # another reader is not starved
    streams.give_back("s:a")
    assert streams.take("s:a")
    for _ in range(3):
        streams.give_back("s:a")
    streams.give_back("s:b")
    assert streams.held == {}  # a reader with no stream is not kept


class _Stream(Response):
    """A stream that runs until the test lets it end (or fails, or is cancelled)."""

    def __init__(self, end: asyncio.Future[None]) -> None:
        super().__init__()
        self.end = end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await self.end


async def _serve(response: Response, sent: list[Message]) -> None:
    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await response({"type": "http", "method": "GET"}, receive, send)


@pytest.mark.parametrize("ending", ["ends", "fails", "cancelled"])
async def test_a_stream_gives_its_place_back_however_it_ends(ending: str) -> None:
    streams = ReaderStreams(most=1)
    loop = asyncio.get_running_loop()
    end: asyncio.Future[None] = loop.create_future()
    first: list[Message] = []
    serving = asyncio.create_task(_serve(ReadersStream(_Stream(end), streams, "s:a"), first))
    while not first:
        await asyncio.sleep(0)
    assert streams.held == {"s:a": 1}

    refused: list[Message] = []
    await _serve(ReadersStream(_Stream(loop.create_future()), streams, "s:a"), refused)
    assert refused[0]["status"] == 429
    assert (b"retry-after", b"5") in refused[0]["headers"]

    if ending == "ends":
        end.set_result(None)
    elif ending == "fails":
        end.set_exception(ConnectionResetError())
    else:
        serving.cancel()
    with_error: BaseException | None = None
    try:
        await serving
    except (ConnectionResetError, asyncio.CancelledError) as err:
        with_error = err
    assert (with_error is None) == (ending == "ends")
    assert streams.held == {}
