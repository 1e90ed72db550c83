"""The run's news waits for the follower's next read of the output (overnight/cli/logs_follow.py
`Reads`): a question is asked after the agent's lines that lead to it, and the news of it must
not be printed before them. Seen in a CI-form run: `overnight logs --follow` printed "waits for
an answer" before the agent's "before the question", the news having come while the follower's
read was under way."""

from __future__ import annotations

import asyncio

import pytest

from overnight.cli.logs_follow import Reads


async def settled() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_news_during_a_read_waits_for_a_read_begun_after_it() -> None:
    reads = Reads()
    reads.begin()
    reads.end()  # the follower is attached: it has just read
    reads.begin()  # and reads again, as the news comes
    news = asyncio.create_task(reads.one_begun_now())
    await settled()
    reads.end()  # this read began before the news: what it printed may miss the lines
    await settled()
    assert not news.done()
    reads.begin()
    await settled()
    assert not news.done()
    reads.end()  # a read begun after the news has printed all written before it
    await settled()
    assert news.done()


async def test_news_between_reads_waits_for_the_next_one() -> None:
    reads = Reads()
    reads.begin()
    reads.end()
    news = asyncio.create_task(reads.one_begun_now())
    await settled()
    assert not news.done()
    reads.begin()
    reads.end()
    await settled()
    assert news.done()


async def test_news_is_not_held_while_the_follower_reads_nothing() -> None:
    """Never attached (a paused sandbox, an attempt not begun): the news goes out at once."""
    reads = Reads()
    await asyncio.wait_for(reads.one_begun_now(), timeout=60)
    reads.begin()
    reads.end()
    reads.ended_at -= Reads.ATTACHED_SECONDS + 1  # its last read long ago
    await asyncio.wait_for(reads.one_begun_now(), timeout=60)


async def test_news_as_the_follower_opens_a_sandbox_waits_for_its_first_read() -> None:
    """Seen in CI: the first look at the run found the question while the follower was still
    opening the sandbox (its header printed, no read begun), and printed it first."""
    reads = Reads()
    reads.attach()
    news = asyncio.create_task(reads.one_begun_now())
    await settled()
    assert not news.done()
    reads.begin()
    reads.end()
    await settled()
    assert news.done()


async def test_news_is_not_held_once_the_follower_lets_a_paused_sandbox_be() -> None:
    reads = Reads()
    reads.attach()
    reads.detach()  # the sandbox was paused: nothing will be read until it wakes
    await asyncio.wait_for(reads.one_begun_now(), timeout=60)


async def test_news_held_for_a_first_read_goes_out_when_the_sandbox_is_found_paused() -> None:
    reads = Reads()
    reads.attach()
    news = asyncio.create_task(reads.one_begun_now())
    await settled()
    assert not news.done()
    reads.detach()  # not at its HOLD_SECONDS: nothing will be read until the sandbox wakes
    await settled()
    assert news.done()


async def test_news_waits_no_longer_than_its_hold_for_a_read_that_does_not_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent flooding its output can make a read long: it delays the news, never hides it."""
    monkeypatch.setattr(Reads, "HOLD_SECONDS", 0.2)
    reads = Reads()
    reads.begin()  # a read under way, never ended
    await asyncio.wait_for(reads.one_begun_now(), timeout=60)
    assert reads.ended == 0
