"""Which addresses no sandbox and no check on a spec's behalf may reach
(overnight/core/addresses.py): every kind, in IPv4 and IPv6, carried inside IPv6 in every way,
written in every spelling; checked against the C library's own reading of numbers and the standard
library's tables."""

from __future__ import annotations

import socket
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overnight.core.addresses import Kind, is_forbidden, numeric_host, plain_loopback_url

EXAMPLES = {
    "127.0.0.1": Kind.LOOPBACK,
    "127.255.1.2": Kind.LOOPBACK,
    "::1": Kind.LOOPBACK,
    "0.0.0.0": Kind.UNSPECIFIED,
    "::": Kind.UNSPECIFIED,
    "10.1.2.3": Kind.PRIVATE,
    "172.16.0.1": Kind.PRIVATE,
    "172.31.255.255": Kind.PRIVATE,
    "192.168.1.1": Kind.PRIVATE,
    "fc00::1": Kind.PRIVATE,
    "fdab:1234::5": Kind.PRIVATE,
    "100.64.0.1": Kind.SHARED,
    "100.127.255.254": Kind.SHARED,
    "169.254.1.1": Kind.LINK_LOCAL,
    "fe80::1": Kind.LINK_LOCAL,
    "fe80::1%eth0": Kind.LINK_LOCAL,
    "169.254.169.254": Kind.METADATA,
    "fd00:ec2::254": Kind.METADATA,
    "224.0.0.1": Kind.MULTICAST,
    "239.255.255.250": Kind.MULTICAST,
    "ff02::1": Kind.MULTICAST,
    "255.255.255.255": Kind.BROADCAST,
    "240.0.0.1": Kind.RESERVED,
    "192.0.2.1": Kind.RESERVED,
    "2001:db8::1": Kind.RESERVED,
    "::8.8.8.8": Kind.RESERVED,  # IPv4-compatible, deprecated: nothing is served there
    "4000::1": Kind.RESERVED,  # outside global unicast
}
PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700::1111",
    "::ffff:8.8.8.8",  # the IPv4 address itself, through IPv6
    "64:ff9b::8.8.8.8",  # through a NAT64 gateway
    "2002:808:808::1",  # 6to4 of a public address
]


@pytest.mark.parametrize(("address", "kind"), EXAMPLES.items())
def test_each_kind_of_forbidden_address_is_named(address: str, kind: Kind) -> None:
    found = is_forbidden(address)
    assert found is not None and found.kind == kind, found
    assert found.this_host == (kind in (Kind.LOOPBACK, Kind.UNSPECIFIED))


@pytest.mark.parametrize("address", PUBLIC)
def test_a_public_address_is_not_forbidden(address: str) -> None:
    assert is_forbidden(address) is None


LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0177.0.0.1",
    "0x7f.0.0.1",
    "0x7f000001",
    "0x7F.1",
    "017700000001",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "::ffff:7f00:1",
    "::127.0.0.1",
    "::ffff:0:127.0.0.1",
    "64:ff9b::127.0.0.1",
    "2002:7f00:1::",
    "0:0:0:0:0:0:0:1",
]


@pytest.mark.parametrize("spelling", LOOPBACK_SPELLINGS)
def test_every_spelling_of_the_loopback_is_the_loopback(spelling: str) -> None:
    found = is_forbidden(spelling)
    assert found is not None and found.kind == Kind.LOOPBACK and found.this_host, spelling


def test_metadata_is_found_however_it_is_carried() -> None:
    for spelling in ("169.254.169.254", "2852039166", "0xa9fea9fe", "0251.0376.0251.0376"):
        assert str(is_forbidden(spelling)) == "cloud metadata (169.254.169.254)", spelling
    carried = is_forbidden("::ffff:169.254.169.254")
    assert str(carried) == "cloud metadata (169.254.169.254 in an IPv6 address, IPv4-mapped)"
    assert is_forbidden("2002:a9fe:a9fe::1") == is_forbidden("2002:a9fe:a9fe:1234::99")


def test_a_name_is_not_judged_without_being_resolved() -> None:
    for name in ("localhost", "example.com", "127.0.0.1.nip.io", "1.2.3.4.", "08", "0x"):
        assert numeric_host(name) is None, name
        with pytest.raises(ValueError):
            is_forbidden(name)


# ----- properties -----

ipv4s = st.integers(0, 2**32 - 1).map(IPv4Address)
FORBIDDEN_V4 = [
    IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]


def forbidden_v4() -> st.SearchStrategy[IPv4Address]:
    return st.sampled_from(FORBIDDEN_V4).flatmap(
        lambda net: st.integers(0, net.num_addresses - 1).map(lambda i: net[i])
    )


def carriers(v4: IPv4Address) -> dict[str, IPv6Address]:
    n = int(v4)
    return {
        "IPv4-mapped": IPv6Address(0xFFFF << 32 | n),
        "IPv4-translated": IPv6Address(0xFFFF << 48 | n),
        "NAT64": IPv6Address(0x64FF9B << 96 | n),
        "6to4": IPv6Address(0x2002 << 112 | n << 80 | 0xBEEF),
        "Teredo": IPv6Address(0x20010000 << 96 | 0x01020304 << 64 | (n ^ 0xFFFFFFFF)),
        "IPv4-compatible": IPv6Address(n),
    }


@given(forbidden_v4())
def test_an_ipv4_address_is_judged_the_same_inside_every_ipv6_carrier(v4: IPv4Address) -> None:
    found = is_forbidden(v4)
    assert found is not None
    for via, v6 in carriers(v4).items():
        if via == "IPv4-compatible" and int(v4) <= 1:
            continue  # :: and ::1 are IPv6's own
        inside = is_forbidden(v6)
        assert inside is not None and (inside.kind, inside.address) == (found.kind, v4), via
        assert inside.via == via


@given(ipv4s)
def test_ipv4_forbids_all_the_standard_library_calls_not_global(v4: IPv4Address) -> None:
    found = is_forbidden(v4)
    if not v4.is_global or v4.is_multicast or v4.is_loopback or v4.is_link_local:
        assert found is not None, v4
    if found is None:  # and what it lets through, the standard library calls global
        assert v4.is_global


# IPv6 addresses anywhere, and inside each block that means something.
BLOCKS = [
    IPv6Network(n)
    for n in (
        "::/96",
        "::ffff:0:0/96",
        "::ffff:0:0:0/96",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2000::/3",
        "2001::/32",
        "2001::/23",
        "2002::/16",
        "2001:db8::/32",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
]
TRANSLATING = [IPv6Network(n) for n in ("::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96")]
ipv6s = st.one_of(
    st.integers(0, 2**128 - 1).map(IPv6Address),
    st.tuples(st.sampled_from(BLOCKS), st.integers(0, 2**128 - 1)).map(
        lambda block: block[0][block[1] % block[0].num_addresses]
    ),
)


@given(ipv6s)
def test_ipv6_forbids_all_the_standard_library_calls_private(v6: IPv6Address) -> None:
    found = is_forbidden(v6)
    if any(v6 in block for block in TRANSLATING):  # a connection goes to the IPv4 address
        inner = IPv4Address(int(v6) & 0xFFFFFFFF)
        assert (found is None) == (is_forbidden(inner) is None), v6
        return
    if v6.is_private or v6.is_multicast or v6.is_reserved or v6.is_site_local:
        assert found is not None, v6
    if found is None:
        assert v6 in IPv6Network("2000::/3"), v6


# One part of an IPv4 number as the C library may be handed it, valid or not.
parts = st.one_of(
    st.integers(0, 2**32).map(str),
    st.integers(0, 2**32).map(lambda n: f"0{n:o}"),
    st.integers(0, 2**32).map(lambda n: f"0x{n:x}"),
    st.integers(0, 300).map(lambda n: f"0X{n:X}"),
    st.sampled_from(["", "0", "00", "08", "0x", "1e3", "-1", " 1", "+1"]),
)


@given(st.lists(parts, min_size=1, max_size=5).map(".".join))
def test_numbers_are_read_as_the_c_library_reads_them(text: str) -> None:
    try:
        info = socket.getaddrinfo(text, 80, socket.AF_INET, flags=socket.AI_NUMERICHOST)
        expected: IPv4Address | None = IPv4Address(info[0][4][0])
    except (OSError, UnicodeError):
        expected = None
    assert numeric_host(text) == expected, text


@given(ipv6s)
def test_ipv6_is_read_in_brackets_and_without(v6: IPv6Address) -> None:
    assert numeric_host(f"[{v6}]") == v6 == numeric_host(v6.exploded)


@pytest.mark.parametrize(
    ("given", "plain"),
    [
        ("http://127.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("http://0x7f.0.0.1:9/x", "http://127.0.0.1:9/x"),
        ("http://0.0.0.0:9", "http://127.0.0.1:9"),
        ("http://[::ffff:127.0.0.1]:9/", "http://127.0.0.1:9/"),
        ("http://[::1]:9/", "http://[::1]:9/"),
        ("http://u:p@127.1:9/", "http://u:p@127.0.0.1:9/"),
        ("https://api.anthropic.com/v1", "https://api.anthropic.com/v1"),
        ("http://10.0.0.5:9/", "http://10.0.0.5:9/"),
    ],
)
def test_a_url_to_this_machine_is_written_as_a_sandboxs_no_proxy_names_it(
    given: str, plain: str
) -> None:
    assert plain_loopback_url(given) == plain
