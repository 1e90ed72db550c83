"""Which IP addresses a sandbox's traffic, or a check the worker makes for a spec, must never
reach: what `is_forbidden` says of an address, and why. Pure: no name is resolved here.

The worker connects on behalf of specs (the `base_url` check at a run's start) and, through
its network gateway, on behalf of agents. Either way a spec's author or an agent would learn,
or reach, what only the worker's machine may: its loopback (the Temporal frontend, the dev
server), its networks (private, carrier-grade NAT, link-local), the cloud's metadata service.
So an address is judged by what it is, never by how it was written: the caller resolves the
name (`getaddrinfo`) and judges every address it gets, and an IPv6 address that carries an
IPv4 one (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo) is judged by
the IPv4 address inside it as well, since that is where a connection to it may land.

`numeric_host` reads a host that is an address in any spelling the C library takes
(`127.0.0.1`, `127.1`, `2130706433`, `0177.0.0.1`, `0x7f.0.0.1`, `[::ffff:127.0.0.1]`), for
a caller that must judge one without resolving.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from urllib.parse import urlsplit, urlunsplit

IPAddress = IPv4Address | IPv6Address


class Kind(StrEnum):
    """Why an address is forbidden, in words a refusal can show."""

    LOOPBACK = "loopback"
    UNSPECIFIED = "unspecified"  # 0.0.0.0 and ::, which a connection takes for this host
    PRIVATE = "private"
    SHARED = "carrier-grade NAT"  # 100.64.0.0/10
    LINK_LOCAL = "link-local"
    METADATA = "cloud metadata"
    MULTICAST = "multicast"
    BROADCAST = "broadcast"
    RESERVED = "reserved"


# Connecting to either reaches a service of the machine that connects.
THIS_HOST = frozenset({Kind.LOOPBACK, Kind.UNSPECIFIED})

# The metadata services of the clouds a worker or a Runtime sandbox may run on: AWS, GCP,
# Azure, OpenStack (169.254.169.254, also link-local), and AWS's IPv6 one (also private).
METADATA = frozenset({IPv4Address("169.254.169.254"), IPv6Address("fd00:ec2::254")})

_V4: tuple[tuple[IPv4Network, Kind], ...] = tuple(
    (IPv4Network(net), kind)
    for net, kind in (
        ("255.255.255.255/32", Kind.BROADCAST),
        ("0.0.0.0/8", Kind.UNSPECIFIED),  # "this network": a connection lands on this host
        ("127.0.0.0/8", Kind.LOOPBACK),
        ("10.0.0.0/8", Kind.PRIVATE),
        ("172.16.0.0/12", Kind.PRIVATE),
        ("192.168.0.0/16", Kind.PRIVATE),
        ("100.64.0.0/10", Kind.SHARED),
        ("169.254.0.0/16", Kind.LINK_LOCAL),
        ("224.0.0.0/4", Kind.MULTICAST),
        ("240.0.0.0/4", Kind.RESERVED),
        ("192.0.0.0/24", Kind.RESERVED),  # IETF protocol assignments
        ("192.0.2.0/24", Kind.RESERVED),  # documentation
        ("198.51.100.0/24", Kind.RESERVED),
        ("203.0.113.0/24", Kind.RESERVED),
        ("198.18.0.0/15", Kind.RESERVED),  # benchmarking
        ("192.88.99.0/24", Kind.RESERVED),  # the old 6to4 relays' anycast
    )
)

_V6: tuple[tuple[IPv6Network, Kind], ...] = tuple(
    (IPv6Network(net), kind)
    for net, kind in (
        ("::/128", Kind.UNSPECIFIED),
        ("::1/128", Kind.LOOPBACK),
        ("64:ff9b:1::/48", Kind.PRIVATE),  # local-use NAT64 (RFC 8215)
        ("fc00::/7", Kind.PRIVATE),  # unique local
        ("fec0::/10", Kind.PRIVATE),  # site-local, deprecated
        ("fe80::/10", Kind.LINK_LOCAL),
        ("ff00::/8", Kind.MULTICAST),
        ("100::/64", Kind.RESERVED),  # discard-only
        ("2001:db8::/32", Kind.RESERVED),  # documentation
        ("3fff::/20", Kind.RESERVED),
        # IETF protocol assignments: Teredo (judged by its client's address first),
        # benchmarking, ORCHID, anycast services; none is a server's address.
        ("2001::/23", Kind.RESERVED),
    )
)
# Only global unicast is routed on the internet; the rest of IPv6 is unassigned.
_GLOBAL_UNICAST = IPv6Network("2000::/3")
_NAT64 = IPv6Network("64:ff9b::/96")
_TRANSLATED = IPv6Network("::ffff:0:0:0/96")  # IPv4-translated (SIIT)
_COMPATIBLE = IPv6Network("::/96")  # IPv4-compatible, deprecated
# The carriers a connection goes through to the IPv4 address itself (a dual-stack socket,
# a NAT64 or SIIT gateway); the others (6to4, Teredo, IPv4-compatible) are tunnels or dead.
_TRANSLATING = frozenset({"IPv4-mapped", "IPv4-translated", "NAT64"})


@dataclass(frozen=True)
class Forbidden:
    """Why an address is forbidden: its `kind`, the address judged (the IPv4 one inside an
    IPv6 address, when that is what decided) and how it was carried (`via`)."""

    kind: Kind
    address: IPAddress
    via: str | None = None

    @property
    def this_host(self) -> bool:
        """Whether a connection to it reaches the machine that makes it."""
        return self.kind in THIS_HOST

    def __str__(self) -> str:
        if self.via is None:
            return f"{self.kind} ({self.address})"
        return f"{self.kind} ({self.address} in an IPv6 address, {self.via})"


def is_forbidden(address: IPAddress | str) -> Forbidden | None:
    """Why no sandbox, and no check on a spec's behalf, may reach `address`; None when it is
    a public address. A string is read by `numeric_host` (ValueError when it is no address):
    a name must be resolved first and each of its addresses judged."""
    ip = _parsed(address) if isinstance(address, str) else address
    if isinstance(ip, IPv4Address):
        return _judge_v4(ip)
    ip = IPv6Address(int(ip))  # without a zone (`%eth0`): the address is the same
    carried = _carried_v4(ip)
    if carried is not None:
        via, inner = carried
        found = _judge_v4(inner)
        if found is not None:
            return Forbidden(found.kind, inner, via)
        if via in _TRANSLATING:
            return None  # it is the public IPv4 address, reached through IPv6
    if ip in METADATA:
        return Forbidden(Kind.METADATA, ip)
    for network, kind in _V6:
        if ip in network:
            return Forbidden(kind, ip)
    if ip not in _GLOBAL_UNICAST:
        return Forbidden(Kind.RESERVED, ip)  # unassigned, or ::/8 carrying a public IPv4
    return None


def _judge_v4(ip: IPv4Address) -> Forbidden | None:
    if ip in METADATA:
        return Forbidden(Kind.METADATA, ip)
    for network, kind in _V4:
        if ip in network:
            return Forbidden(kind, ip)
    return None


def _carried_v4(ip: IPv6Address) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 address carries, and how (None: it carries none)."""
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    low = IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _TRANSLATED:
        return "IPv4-translated", low
    if ip in _NAT64:
        return "NAT64", low
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip.teredo is not None:
        return "Teredo", ip.teredo[1]  # the client's address, where the tunnel ends
    if ip in _COMPATIBLE and int(ip) > 1:  # :: and ::1 are themselves
        return "IPv4-compatible", low
    return None


# One part of an IPv4 address as the C library's inet_aton reads it: hex, octal or decimal.
_PART = r"(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)"
_INET_ATON = re.compile(rf"{_PART}(?:\.{_PART}){{0,3}}")


def numeric_host(host: str) -> IPAddress | None:
    """The address `host` spells, in any spelling `getaddrinfo` takes for a number: IPv6
    (brackets and a zone allowed) and IPv4 as `inet_aton` reads it (one to four parts, each
    decimal, octal with a leading 0, or hex with 0x; the last part fills the bytes left, so
    `127.1` is 127.0.0.1 and `2130706433` too). None: `host` is a name, to be resolved."""
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in text:
        try:
            return IPv6Address(text)
        except ValueError:
            return None
    if not _INET_ATON.fullmatch(text):
        return None
    parts = [_part_value(part) for part in text.split(".")]
    # Each part but the last is one byte; the last fills the bytes that are left.
    last_bits = 8 * (5 - len(parts))
    if any(value > 0xFF for value in parts[:-1]) or parts[-1] >= 1 << last_bits:
        return None
    value = 0
    for part in parts[:-1]:
        value = value << 8 | part
    return IPv4Address(value << last_bits | parts[-1])


def _part_value(part: str) -> int:
    if part[:2] in ("0x", "0X"):
        return int(part[2:], 16)
    if len(part) > 1 and part[0] == "0":
        return int(part, 8)
    return int(part)


def _parsed(text: str) -> IPAddress:
    found = numeric_host(text)
    if found is None:
        try:
            return ip_address(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an IP address") from None
    return found


def plain_loopback_url(url: str) -> str:
    """`url` with a host of this machine in any spelling (`127.1`, `0x7f.1`, `0.0.0.0`,
    `[::ffff:127.0.0.1]`) written the one way a sandbox's `NO_PROXY` names (`127.0.0.1`,
    `[::1]`): a client there that took `127.1` for a name would ask the gateway, which
    refuses this machine's addresses."""
    parts = urlsplit(url)
    address = numeric_host(parts.hostname) if parts.hostname else None
    found = None if address is None else is_forbidden(address)
    if found is None or not found.this_host:
        return url
    plain = "127.0.0.1" if found.address.version == 4 else "[::1]"
    netloc = plain if parts.port is None else f"{plain}:{parts.port}"
    userinfo, at, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{netloc}"))
