"""Whether a coding agent's `base_url` can be reached, as a run's start finds it: judged by the
addresses its host resolves to, and tried from the worker only where the spec may send its
sandbox.

The check runs on the worker, on behalf of whoever wrote the spec, and its answer goes back
to them ("nothing accepts connections at ..."). Tried anywhere, it would tell a spec's author
which ports listen on the worker's own loopback, whatever the sandbox may reach: a port
scanner of the worker. So:

- the host is resolved here (`getaddrinfo`, every spelling of a number read as the C library
  reads it: `127.1`, `2130706433`, `0177.0.0.1`, `0x7f.1`, `[::ffff:127.0.0.1]`) and each
  address judged by `overnight.core.addresses`, never the name as written;
- an address of the worker's own (loopback or unspecified, however carried) is, for a local
  sandbox, reached only on a port in the spec's `host_ports`: any other port is refused with
  one message for every spelling, before any connection. A Runtime sandbox has no way to the
  worker's loopback (there such an address is the sandbox's own machine, which the worker
  cannot see), so nothing is tried and nothing said;
- link-local (the cloud's metadata service among them), multicast, broadcast and reserved
  addresses are no model API: refused, never tried;
- otherwise the worker connects to the addresses it judged (not the name again, which could
  resolve elsewhere the second time).

Only at the start: a gateway down for a while mid-run is backed off like a 529.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from overnight.core.addresses import IPAddress, Kind, is_forbidden, numeric_host
from overnight.core.models import RunSpec
from overnight.core.provider_traits import traits

# How long the run's start waits for `base_url` to accept a connection.
BASE_URL_CONNECT_SECONDS = 3.0
# Never a model API: refused at once, whatever the provider.
_NEVER = frozenset({Kind.LINK_LOCAL, Kind.METADATA, Kind.MULTICAST, Kind.BROADCAST, Kind.RESERVED})

Connect = Callable[[tuple[str, int], float], Any]
Resolve = Callable[[str, int], list[IPAddress]]


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to here, in `getaddrinfo`'s order, each once."""
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = numeric_host(str(sockaddr[0]))
        if address is not None and address not in found:
            found.append(address)
    return found


def base_url_problems(
    spec: RunSpec,
    connect: Connect = socket.create_connection,
    resolver: Resolve = resolve,
) -> list[str]:
    """What stops the coding agent's `base_url` from serving the run (one refusal, or none):
    an address no sandbox may be sent to, the worker's loopback on a port the spec does not
    list in `host_ports`, or nothing accepting a connection within `BASE_URL_CONNECT_SECONDS`
    (the CLI would retry, and the adapter back off, for ever)."""
    given, name = (spec.agent.base_url, "base_url") if spec.agent else ("", "")
    if spec.agent is None and spec.model_base_url:
        # The gateway's upstream for an agent of one's own: the same rules, the same reasons
        # (the worker connects there on the spec's behalf).
        given, name = spec.model_base_url, "model_base_url"
    if not given:
        return []  # the vendor's own API
    url = urlsplit(given)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    where = f"{host}:{port}"
    field = f"field agent.{name}" if spec.agent is not None else f"field {name}"
    try:
        addresses = resolver(host, port)
    except (OSError, UnicodeError) as error:
        why = getattr(error, "strerror", None) or str(error) or type(error).__name__
        return [f"{field}: {host} is not found from this worker ({why}): fix {name}"]
    judged = [(address, is_forbidden(address)) for address in addresses]
    for _, forbidden in judged:
        if forbidden is not None and forbidden.kind in _NEVER:
            return [f"{field}: {where} is {forbidden}, which is no model API: fix {name}"]
    if any(forbidden is not None and forbidden.this_host for _, forbidden in judged):
        if not traits(spec.provider).reaches_worker_loopback:
            return []  # the sandbox's own loopback, not the worker's: nothing to try here
        if port not in spec.host_ports:
            return [
                f"{field}: {where} is on the worker's loopback, which a sandbox reaches only "
                f"on the ports in host_ports: add {port} to host_ports"
            ]
    why = "no address"
    for address, _ in judged:
        try:
            connect((str(address), port), BASE_URL_CONNECT_SECONDS).close()
            return []
        except OSError as error:
            why = error.strerror or str(error) or type(error).__name__
    return [
        f"{field}: nothing accepts connections at {where} from this worker ({why}): start "
        f"the model API or gateway there, or fix {name}"
    ]
