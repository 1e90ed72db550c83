"""Which host a worker stands for, and the task queue of that host's sandboxes.

A local sandbox lives on one machine (its folder under that machine's `OVERNIGHT_HOME`, its
agent a process there), so every activity on it after its create goes to its host's own task
queue, `<task queue>@<host>` (`overnight@build-7`), which only that host's workers poll. The
host is `OVERNIGHT_HOST`, or the machine's host name: two workers on one machine with other
values (and homes) stand for two hosts. These names are a contract (docs/many-hosts.md).
Pure names; the worker's settings are read in `overnight.core.host_settings`.
"""

from __future__ import annotations

import re

from overnight.core.provider_traits import traits

HOST_ENV = "OVERNIGHT_HOST"
HOST_LOST_ENV = "OVERNIGHT_HOST_LOST_SECONDS"
# A host whose queue has had no poller this long is taken as lost: its runs restart elsewhere
# from their checkpoints. Long enough for a deploy (a worker restart takes seconds) and for a
# live worker's idle long poll (the server refreshes a poller's last access at least a minute).
DEFAULT_HOST_LOST_SECONDS = 180.0
MIN_HOST_LOST_SECONDS = 5.0
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
HOST_NAME_RULE = "letters, digits, '.', '_' and '-' (1-128, not first)"
# A spec names at most this many hosts its sandboxes may be made on (`RunSpec.hosts`).
MAX_SPEC_HOSTS = 64


def host_queue(task_queue: str, host: str) -> str:
    """The task queue of `host`'s sandboxes, for runs started on `task_queue`."""
    return f"{task_queue}@{host}"


def host_of_queue(queue: str) -> str:
    """The host a host queue names (the queue itself if it names none)."""
    return queue.rpartition("@")[2] or queue


def host_bound(provider: str) -> bool:
    """Whether `provider`'s sandboxes belong to the host that made them (Runtime's are
    reached by any)."""
    return traits(provider).host_bound


def check_spec_hosts(hosts: list[str], provider: str) -> None:
    """What a spec's `hosts` may not be (ValueError, one line): host names, each once, and
    only for a provider whose sandboxes belong to a host."""
    if hosts and not host_bound(provider):
        raise ValueError(f"hosts: sandboxes of provider {provider!r} belong to no host")
    seen: set[str] = set()
    for host in hosts:
        if not HOST_NAME.match(host):
            raise ValueError(f"hosts: {host!r} is not a host name ({HOST_NAME_RULE})")
        if host in seen:
            raise ValueError(f"hosts: {host} is listed twice")
        seen.add(host)
