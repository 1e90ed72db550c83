"""The console's settings: what it refuses to start with, in one line naming the setting and the
fix, and what it makes of what it is given. Pure: no server."""

from __future__ import annotations

import pytest

from overnight.cli.error_text import one_line
from overnight.console.app import host_name
from overnight.console.settings import (
    OPERATORS_ENV,
    READ_TOKEN_ENV,
    ROLE_HEADER_ENV,
    SECRET_ENV,
    TOKEN_ENV,
    TRUSTED_PROXIES_ENV,
    USER_HEADER_ENV,
    ConsoleSettingsError,
    is_loopback,
    settings_from,
)

OPERATOR = "o" * 24
READER = "r" * 24


@pytest.mark.parametrize(
    ("environ", "address", "said"),
    [
        (
            {},
            "0.0.0.0",
            f"--address 0.0.0.0 is not loopback and no one is checked: set {TOKEN_ENV}",
        ),
        ({TOKEN_ENV: "short"}, "127.0.0.1", f"{TOKEN_ENV} is 5 characters: use at least 16"),
        (
            {TOKEN_ENV: OPERATOR, READ_TOKEN_ENV: OPERATOR},
            "127.0.0.1",
            f"{TOKEN_ENV} and {READ_TOKEN_ENV} are the same: a reader could act",
        ),
        (
            {USER_HEADER_ENV: "X-Forwarded-User"},
            "10.0.0.1",
            f"{USER_HEADER_ENV} is set without {TRUSTED_PROXIES_ENV}: anyone could send",
        ),
        (
            {TRUSTED_PROXIES_ENV: "10.0.0.5"},
            "127.0.0.1",
            f"{TRUSTED_PROXIES_ENV} or {ROLE_HEADER_ENV} is set without {USER_HEADER_ENV}",
        ),
        (
            {USER_HEADER_ENV: "X-User", TRUSTED_PROXIES_ENV: "10.0.0.5, proxy.example"},
            "10.0.0.1",
            f"{TRUSTED_PROXIES_ENV}: 'proxy.example' is not an IP address or network",
        ),
        ({USER_HEADER_ENV: "X User", TRUSTED_PROXIES_ENV: "10.0.0.5"}, "::", "is not a header"),
        ({SECRET_ENV: "tiny"}, "127.0.0.1", f"{SECRET_ENV} is 4 characters: use at least 32"),
    ],
)
def test_a_setting_the_console_cannot_use_is_refused_in_one_line(
    environ: dict[str, str], address: str, said: str
) -> None:
    with pytest.raises(ConsoleSettingsError) as refused:
        settings_from(environ, address=address)
    line = one_line(refused.value)
    assert said in line and "\n" not in line
    assert refused.value.bad_input  # the CLI exits 2
    for value in environ.values():
        if len(value) >= 16:
            assert value not in line  # never a token in the message


def test_beyond_loopback_a_token_or_a_trusted_proxy_is_enough() -> None:
    with_token = settings_from({TOKEN_ENV: OPERATOR, READ_TOKEN_ENV: READER}, address="0.0.0.0")
    assert (with_token.operator_token, with_token.read_token) == (OPERATOR, READER)
    assert not with_token.token_made_here and not with_token.loopback
    proxied = settings_from(
        {
            USER_HEADER_ENV: "X-Forwarded-User",
            TRUSTED_PROXIES_ENV: "10.0.0.5, 10.1.0.0/24",
            OPERATORS_ENV: "alice, bob",
        },
        address="10.0.0.9",
    )
    assert proxied.user_header == "x-forwarded-user" and proxied.operator_token is None
    assert [str(n) for n in proxied.trusted_proxies] == ["10.0.0.5/32", "10.1.0.0/24"]
    assert proxied.operators == frozenset({"alice", "bob"})


def test_on_loopback_with_nothing_set_it_makes_an_operator_token() -> None:
    made = settings_from({}, address="127.0.0.1")
    assert made.token_made_here and made.operator_token and len(made.operator_token) >= 24
    assert settings_from({}).operator_token != made.operator_token
    assert made.operator_token not in repr(made)


def test_loopback_names() -> None:
    assert [is_loopback(a) for a in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost")] == [
        True
    ] * 5
    assert [is_loopback(a) for a in ("0.0.0.0", "::", "10.0.0.1", "example.com")] == [False] * 4
    assert [host_name(h) for h in ("[::1]:8234", "localhost:80", "127.0.0.1", "[::1]")] == [
        "[::1]",
        "localhost",
        "127.0.0.1",
        "[::1]",
    ]
