"""Name resolution for the gateway: the system's resolver, after a hosts file of the worker's
own (`OVERNIGHT_GATEWAY_HOSTS`, the /etc/hosts format) that names addresses for names, as a
company's split DNS would. The gateway connects to the very address it judged: no second
lookup stands between the rule and the connection (DNS rebinding)."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from pathlib import Path

from overnight.core.egress import literal_address

HOSTS_ENV = "OVERNIGHT_GATEWAY_HOSTS"
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class HostsFile:
    """A hosts file read again whenever it changes."""

    def __init__(self, path: str | None) -> None:
        self._path = Path(path) if path else None
        self._seen: tuple[float, dict[str, list[Address]]] | None = None

    def lookup(self, host: str) -> list[Address] | None:
        if self._path is None:
            return None
        try:
            changed = self._path.stat().st_mtime
        except OSError:
            return None
        if self._seen is None or self._seen[0] != changed:
            self._seen = (changed, _parse(self._path.read_text(errors="replace")))
        return self._seen[1].get(host)


def _parse(text: str) -> dict[str, list[Address]]:
    names: dict[str, list[Address]] = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) < 2:
            continue
        address = literal_address(words[0])
        if address is None:
            continue
        for name in words[1:]:
            names.setdefault(name.lower().rstrip("."), []).append(address)
    return names


class Resolver:
    def __init__(self, hosts_path: str | None = None) -> None:
        self._hosts = HostsFile(hosts_path if hosts_path is not None else os.environ.get(HOSTS_ENV))

    async def resolve(self, host: str, port: int) -> list[Address]:
        """Every address `host` names (a literal address: itself); empty when none."""
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        listed = self._hosts.lookup(host)
        if listed is not None:
            return listed
        loop = asyncio.get_running_loop()
        try:
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return []
        addresses: list[Address] = []
        for _family, _type, _proto, _name, sockaddr in found:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
        return addresses
