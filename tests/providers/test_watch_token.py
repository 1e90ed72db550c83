"""The Runtime watch's token: where a watch stands, carried in the workflow's state between
observes, so every field must come back as it went (a lost `unconfirmed` count is an exit
lost until the stall deadline; a lost `pending` is news lost across a pause)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from activities.providers.runtime.watch_stream import WatchToken

# Watch ids as Runtime writes them (no '@', '~', '?' or '!', which the token uses).
watch_ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=24)


@given(
    watch_id=watch_ids,
    cursor=st.integers(min_value=0, max_value=2**53),
    pending=st.sampled_from(["", "x", "t", "r", "xt", "xtr"]),
    mark=st.none() | st.integers(min_value=0, max_value=2**53),
    unconfirmed=st.integers(min_value=0, max_value=99),
)
def test_a_token_comes_back_as_it_went(
    watch_id: str, cursor: int, pending: str, mark: int | None, unconfirmed: int
) -> None:
    token = WatchToken(watch_id, cursor, pending, mark, unconfirmed)
    assert WatchToken.decode(token.encode()) == token


def test_tokens_written_before_the_exit_rechecks_still_read() -> None:
    assert WatchToken.decode("w_1@7~123!x") == WatchToken("w_1", 7, "x", 123, 0)
    assert WatchToken.decode("w_1@7") == WatchToken("w_1", 7)


def test_a_malformed_token_is_no_token() -> None:
    assert WatchToken.decode("w_1@7?x") is None
    assert WatchToken.decode("w_1@seven") is None
    assert WatchToken.decode("no-cursor") is None
