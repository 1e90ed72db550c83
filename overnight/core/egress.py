"""Where a sandbox's network may go: the run's allow-list of host names (`RunSpec.egress`),
held to what its worker grants, and the addresses no name may lead to.

A local sandbox has no route out: it reaches the worker's gateway (and its `host_ports`) on
its own loopback, and the gateway connects for it only to names on the run's allow-list, and
only to public addresses (a name that resolves to the worker's loopback, a private network or
the cloud's metadata service is refused after resolution, on every connection). These are the
pure rules; the gateway (`activities/gateway/`) applies them.

Patterns are host names (`github.com`), or `*.` and a name for every name below it
(`*.pypi.org` holds `files.pypi.org`, not `pypi.org`), or a literal IP address.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal
from urllib.parse import urlsplit

from overnight.core.addresses import numeric_host
from overnight.core.agent_kinds import AGENT_CLIS

MAX_EGRESS = 64
# What a run may reach without asking, besides its own repository's host and its coding
# agent's model API: the package registries, unless the worker names others.
DEFAULT_GRANTED = ("pypi.org", "files.pythonhosted.org", "registry.npmjs.org")
EGRESS_ALLOW_ENV = "OVERNIGHT_EGRESS_ALLOW"
EGRESS_ADDRESSES_ENV = "OVERNIGHT_EGRESS_ADDRESSES"
ALLOW_OPEN_NETWORK_ENV = "OVERNIGHT_ALLOW_OPEN_NETWORK"
# "proxied": only the run's allow-list, through the gateway; "open": every public name,
# through the gateway (granted by the worker).
Network = Literal["proxied", "open"]
OPEN = "*"
# The status and the card name this many refused hosts; the rest are counted together.
SHOWN_HOSTS = 3

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")


class EgressError(ValueError):
    """A pattern or a worker setting that cannot be read (one line, naming it)."""


def normal_host(host: str) -> str:
    """`host` as the rules compare it: lower case, no trailing dot, IDNA for other scripts,
    brackets off an IPv6 literal. EgressError when it is no host name or address."""
    text = host.strip().rstrip(".").lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    address = literal_address(text)
    if address is not None:
        return str(address)
    try:
        text = text.encode("idna").decode("ascii")
    except UnicodeError:
        raise EgressError(f"{host!r} is not a host name") from None
    if not _NAME.match(text) or len(text) > 253:
        raise EgressError(f"{host!r} is not a host name")
    return text


def literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` spells, in any spelling the C library takes (`127.1`, `0x7f.1`,
    `2130706433`), or None for a name: an address is judged as what it is."""
    return numeric_host(host.strip())


def check_pattern(pattern: str) -> str:
    """The pattern in normal form; EgressError (one line) when it is none."""
    text = pattern.strip().lower()
    if text == OPEN:
        raise EgressError('egress: "*" is not a pattern: ask for network "open" instead')
    wild = text.startswith("*.")
    name = normal_host(text[2:] if wild else text)
    if wild and literal_address(name) is not None:
        raise EgressError(f"egress: {pattern!r}: a wildcard goes before a name, not an address")
    if wild and "." not in name:
        raise EgressError(f"egress: {pattern!r} would allow a whole top-level domain")
    return f"*.{name}" if wild else name


def check_egress(patterns: Sequence[str]) -> list[str]:
    """`RunSpec.egress` in normal form, each once; ValueError naming the first bad one."""
    if len(patterns) > MAX_EGRESS:
        raise ValueError(f"egress: at most {MAX_EGRESS} patterns")
    try:
        return list(dict.fromkeys(check_pattern(pattern) for pattern in patterns))
    except EgressError as error:
        said = str(error)
        raise ValueError(said if said.startswith("egress") else f"egress: {said}") from None


def matches(pattern: str, host: str) -> bool:
    """Whether `pattern` (normal form) allows `host` (normal form)."""
    if pattern == OPEN:
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


def allows(patterns: Iterable[str], host: str) -> bool:
    return any(matches(pattern, host) for pattern in patterns)


def covers(grant: str, pattern: str) -> bool:
    """Whether the worker's `grant` allows every host the spec's `pattern` does."""
    if grant == OPEN:
        return True
    if pattern.startswith("*."):
        return grant.startswith("*.") and (pattern[1:].endswith(grant[1:]))
    return matches(grant, pattern)


def host_of(url: str) -> str | None:
    """The host a repository or API URL names (`git@host:path` too); None for a local path."""
    if "://" not in url:
        scp = re.match(r"^[\w.-]+@([\w.-]+):", url)
        return normal_host(scp.group(1)) if scp else None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host or urlsplit(url).scheme == "file":
        return None
    try:
        return normal_host(host)
    except EgressError:
        return None


def implied(repo: str, agent_kind: str | None, agent_base_url: str | None) -> list[str]:
    """What a run reaches without listing it: its repository's host, and its coding agent's
    model API (the vendor's, or the host of its `base_url`)."""
    found = [host for host in [host_of(repo)] if host]
    if agent_kind is not None:
        if agent_base_url:
            found += [host for host in [host_of(agent_base_url)] if host]
        else:
            found += AGENT_CLIS[agent_kind].egress_hosts if agent_kind in AGENT_CLIS else ()
    return list(dict.fromkeys(found))


def refusals(
    patterns: Sequence[str],
    network: str,
    *,
    implied_hosts: Sequence[str],
    granted: Sequence[str],
    open_allowed: bool,
) -> list[str]:
    """What of a spec's `egress` and `network` the worker does not grant, one line each."""
    found: list[str] = []
    if network == "open" and not open_allowed:
        found.append(
            'field network: "open" (every public name) is not allowed by this worker (start it '
            f"with {ALLOW_OPEN_NETWORK_ENV}=1 to allow it, or list the names in egress)"
        )
    own = [*implied_hosts, *granted]
    refused = [pattern for pattern in patterns if not any(covers(g, pattern) for g in own)]
    if refused:
        names = ", ".join(refused)
        found.append(
            f"field egress: {names} not granted by this worker (start it with "
            f"{EGRESS_ALLOW_ENV}={','.join([*granted, *refused])} to allow it)"
        )
    return found


def parse_granted(value: str | None) -> tuple[str, ...]:
    """`OVERNIGHT_EGRESS_ALLOW`: comma-separated patterns (`*` every name); unset: the package
    registries. EgressError naming a bad one."""
    if value is None:
        return DEFAULT_GRANTED
    found = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        if item == OPEN:
            found.append(OPEN)
            continue
        try:
            found.append(check_pattern(item))
        except EgressError as error:
            raise EgressError(f"{EGRESS_ALLOW_ENV}: {error}") from None
    return tuple(dict.fromkeys(found))


AddressRule = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int | None]


def parse_address_rules(value: str) -> tuple[AddressRule, ...]:
    """`OVERNIGHT_EGRESS_ADDRESSES`: the addresses the worker lets names lead to although they
    are private (`10.1.0.0/16`, `127.0.0.1:8443`, `[fd00::1]:443`); EgressError naming a bad one."""
    rules: list[AddressRule] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        address, port = item, None
        bracketed = re.match(r"^\[([^\]]+)\](?::(\d+))?$", item)
        if bracketed:
            address, port = bracketed.group(1), _port(bracketed.group(2), item)
        elif item.count(":") == 1:
            address, _, text = item.partition(":")
            port = _port(text, item)
        try:
            rules.append((ipaddress.ip_network(address, strict=False), port))
        except ValueError:
            raise EgressError(f"{EGRESS_ADDRESSES_ENV}: {item!r} is not an address") from None
    return tuple(rules)


def _port(text: str | None, item: str) -> int | None:
    if text is None:
        return None
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise EgressError(f"{EGRESS_ADDRESSES_ENV}: {item!r} names no TCP port")
    return int(text)


def worker_allows(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
    port: int,
    rules: Sequence[AddressRule],
) -> bool:
    """Whether the worker named `address:port` as reachable although it is not public."""
    return any(
        address.version == network.version and address in network and rule_port in (None, port)
        for network, rule_port in rules
    )


def refusal_words(totals: Mapping[str, int]) -> str | None:
    """`blocked: 14 connections to evil.example, 2 to 169.254.169.254`; None when none."""
    if not totals:
        return None
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    parts = []
    for i, (host, count) in enumerate(ranked[:SHOWN_HOSTS]):
        noun = ("connection" if count == 1 else "connections") if i == 0 else ""
        parts.append(f"{count} {noun} to {host}".replace("  ", " "))
    rest = ranked[SHOWN_HOSTS:]
    if rest:
        parts.append(f"{sum(count for _, count in rest)} to {len(rest)} other name(s)")
    return "blocked: " + ", ".join(parts)
