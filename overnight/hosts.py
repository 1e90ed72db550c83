"""Which host a worker stands for, and the task queue of that host's sandboxes.

A local sandbox lives on one machine (its folder under that machine's `OVERNIGHT_HOME`, its
agent a process there), so every activity on it after its create goes to its host's own task
queue, `<task queue>@<host>` (`overnight@build-7`), which only that host's workers poll. The
host is `OVERNIGHT_HOST`, or the machine's host name: two workers on one machine with other
values (and homes) stand for two hosts. These names are a contract (docs/many-hosts.md).
Pure names; the worker's settings are read in `overnight.host_settings`.
"""

from __future__ import annotations

HOST_ENV = "OVERNIGHT_HOST"
HOST_LOST_ENV = "OVERNIGHT_HOST_LOST_SECONDS"
# A host whose queue has had no poller this long is taken as lost: its runs restart elsewhere
# from their checkpoints. Long enough for a deploy (a worker restart takes seconds) and for a
# live worker's idle long poll (the server refreshes a poller's last access at least a minute).
DEFAULT_HOST_LOST_SECONDS = 180.0
MIN_HOST_LOST_SECONDS = 5.0
# Providers whose sandboxes belong to the host that made them (Runtime's are reached by any).
HOST_BOUND_PROVIDERS = frozenset({"local"})


def host_queue(task_queue: str, host: str) -> str:
    """The task queue of `host`'s sandboxes, for runs started on `task_queue`."""
    return f"{task_queue}@{host}"


def host_of_queue(queue: str) -> str:
    """The host a host queue names (the queue itself if it names none)."""
    return queue.rpartition("@")[2] or queue


def host_bound(provider: str) -> bool:
    return provider in HOST_BOUND_PROVIDERS
