"""A sandbox's network rules in the fake Runtime API: their shape, as stored, and what
Runtime's proxy would answer a connection under them. Pure: nothing here resolves a name.

What the public docs say (`withruntime/runtime`, `packages/cloud-guide/docs/`:
`sandbox-environment.md` "The network", `security.md` "Network access", `api.md`):
- `{"internet": bool, "allow": [...], "deny": [...], "connect": [...]}`, at create (`network`,
  "same shape as `PUT /v1/sandboxes/{id}/network`") or with that route; unknown fields are
  refused, each named, as everywhere in the API.
- `internet: false` refuses every outbound connection; `allow` narrows the sandbox to a list,
  on every port it may use: domains, `*.domain` for every name under one, addresses or CIDR
  ranges; `deny` always wins; `connect` adds `host:port` pairs. `internet: false` with `allow`
  is stored as `internet: true` with that list (the SDK's own note). The rules read back say
  `openPorts: true` for a sandbox that reaches every port (a paid one; a trial one reaches
  80 and 443).
- Private and internal addresses (and so the cloud metadata address) are refused to every
  sandbox, whatever its rules. A refused request through the proxy is answered with
  `X-Runtime-Egress: internet-off` or `rule-not-allowed`; for a private address the docs say
  only that it is refused, so `PRIVATE` is the fake's own word.

The fake's assumptions where the docs say nothing: `internet` must be given (every documented
example gives it, and the SDK always sends it); `"*"` is no destination (leave `allow` out
for every public host: the SDK's own adapters never send it); a `connect` pair names a host or
an address, not a pattern; no limit on the lists' lengths is enforced.
"""

from __future__ import annotations

import ipaddress
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from overnight.core.addresses import is_forbidden, numeric_host

FIELDS = ("internet", "allow", "deny", "connect")
# The `X-Runtime-Egress` words of a refusal.
INTERNET_OFF = "internet-off"
NOT_ALLOWED = "rule-not-allowed"
PRIVATE = "private-address"  # the fake's word: Runtime documents the refusal, not its header

_LABEL = r"(?!-)[a-z0-9_-]{1,63}(?<!-)"
_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def network_problems(body: Any, prefix: str = "") -> list[tuple[str, str]]:
    """What a rules body gets wrong, as (field, message) pairs naming each field (`prefix` is
    `network.` inside a create body); empty when it is fine."""
    if not isinstance(body, dict):
        return [(prefix.rstrip(".") or "body", "The network rules must be a JSON object.")]
    problems = [(f"{prefix}{k}", f"Unknown field {prefix}{k}.") for k in body if k not in FIELDS]
    if not isinstance(body.get("internet"), bool):
        problems.append((f"{prefix}internet", f"{prefix}internet must be true or false."))
    for name in ("allow", "deny", "connect"):
        if name not in body:
            continue
        entries = body[name]
        where = f"{prefix}{name}"
        if not isinstance(entries, list):
            problems.append((where, f"{where} must be a list of strings."))
            continue
        check = _pair_problem if name == "connect" else _destination_problem
        for index, entry in enumerate(entries):
            said = check(entry)
            if said is not None:
                problems.append((f"{where}[{index}]", f"{where}[{index}]: {said}"))
    return problems


def _destination_problem(entry: Any) -> str | None:
    """An `allow` or `deny` entry: a domain, `*.domain`, an address or a CIDR range."""
    if not isinstance(entry, str) or not entry.strip():
        return "a destination is a non-empty string."
    text = entry.strip().lower()
    if text == "*":
        return '"*" is not a destination: leave allow out for every public host.'
    if _network(text) is not None:
        return None
    name = text[2:] if text.startswith("*.") else text
    if _is_name(name):
        return None
    return f"{entry!r} is not a domain, *.domain, address or CIDR range."


def _pair_problem(entry: Any) -> str | None:
    """A `connect` entry: `host:port`, the host a name or an address (`[v6]:port`)."""
    if not isinstance(entry, str):
        return "a pair is a string host:port."
    host, port = _split_pair(entry)
    if host is None or port is None:
        return f"{entry!r} is not host:port."
    if not 1 <= port <= 65535:
        return f"{entry!r}: the port must be 1 to 65535."
    if numeric_host(host) is None and not _is_name(host.lower()):
        return f"{entry!r}: {host!r} is not a host name or an address."
    return None


def _split_pair(entry: str) -> tuple[str | None, int | None]:
    bracketed = re.match(r"^\[([^\]]+)\]:(\d{1,5})$", entry.strip())
    if bracketed:
        return bracketed.group(1), int(bracketed.group(2))
    host, colon, port = entry.strip().rpartition(":")
    if not colon or not host or ":" in host or not port.isdigit() or len(port) > 5:
        return None, None
    return host, int(port)


def _is_name(text: str) -> bool:
    return len(text) <= 253 and _NAME.match(text.rstrip(".")) is not None


def _network(text: str) -> Network | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


@dataclass
class NetworkRules:
    """One sandbox's rules as Runtime stores them (a create without `network`: the public
    web, on every port of a paid sandbox)."""

    internet: bool = True
    allow: list[str] | None = None
    deny: list[str] | None = None
    connect: list[str] | None = None
    updated_at: float = field(default_factory=time.time)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> NetworkRules:
        """Rules from a body `network_problems` found nothing wrong with."""
        allow = body.get("allow")
        return cls(
            # internet false with an allow-list is that allow-list (the SDK's note).
            internet=bool(body["internet"]) or bool(allow),
            allow=None if allow is None else list(allow),
            deny=None if body.get("deny") is None else list(body["deny"]),
            connect=None if body.get("connect") is None else list(body["connect"]),
        )

    def shown(self, *, trial: bool = False) -> dict[str, Any]:
        """The rules as `GET`/`PUT /v1/sandboxes/{id}/network` answer them."""
        answer: dict[str, Any] = {"internet": self.internet}
        for name in ("allow", "deny", "connect"):
            value = getattr(self, name)
            if value is not None:
                answer[name] = list(value)
        answer["openPorts"] = self.internet and not trial
        answer["updatedAt"] = datetime.fromtimestamp(self.updated_at, UTC).isoformat()
        return answer

    def verdict(self, host: str, port: int = 443) -> str | None:
        """What Runtime's proxy would answer a connection to `host:port` (a refusal's word),
        or None: let through. Names are not resolved: a name is judged as written."""
        address = numeric_host(host)
        if address is not None and is_forbidden(address) is not None:
            return PRIVATE
        if not self.internet:
            return INTERNET_OFF
        if self.deny and any(_matches(entry, host) for entry in self.deny):
            return NOT_ALLOWED
        if self.allow is None or any(_matches(entry, host) for entry in self.allow):
            return None
        pairs = {_split_pair(pair) for pair in self.connect or []}
        if any(
            _matches(pair_host, host) and pair_port == port
            for pair_host, pair_port in pairs
            if pair_host is not None
        ):
            return None
        return NOT_ALLOWED


def _matches(entry: str, host: str) -> bool:
    """Whether one destination entry covers `host` (a name or an address)."""
    entry, host = entry.strip().lower().rstrip("."), host.strip().lower().rstrip(".")
    address = numeric_host(host)
    network = _network(entry)
    if network is not None:
        return address is not None and address.version == network.version and address in network
    if address is not None:
        return False
    if entry.startswith("*."):
        return host.endswith(entry[1:])
    return host == entry
