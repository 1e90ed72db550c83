"""What each sandbox provider can do, declared once. The ground's rules, the activities and
the workflow ask a provider's traits, never its name (a test holds it), so a new provider is
its package under activities/providers/, its entry in that registry and its row here.

How a provider is built, its forensics and its disk account are the activities' registry
(activities/providers/registry.py), which lists the same names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Provider = Literal["local", "runtime"]


@dataclass(frozen=True)
class ProviderTraits:
    name: str
    # How its name reads in a sentence.
    label: str
    # Its sandboxes run on the worker's host and belong to it: their steps go to that host's
    # queue, and a lost host costs them a restart elsewhere.
    host_bound: bool
    # Its sandboxes see the worker's folders: binds, the spec's repository folder, the kit
    # and the coding-agent CLIs mounted read-only, the CLIs' session store.
    mounts_worker_folders: bool
    # Its sandboxes reach ports on the worker's loopback (`host_ports`, the host's gateway).
    reaches_worker_loopback: bool
    # The worker isolates its sandboxes itself: the spec's `isolation` applies.
    worker_isolates: bool
    # Its API counts running sandboxes per account key (admission's `max_runs_per_key`).
    counted_per_key: bool
    # A coding agent's CLI comes with the sandbox, copied from a template snapshot.
    cli_from_template: bool
    # It keeps secrets at its own egress proxy, out of its sandboxes (the model key).
    egress_secrets: bool
    # Its API's ranges bound the spec's size and lease (reference section 6).
    api_ranges: bool
    # It keeps an account of what each sandbox cost, which a run can read (and a daily limit
    # of the key); without one, the run only estimates.
    keeps_account: bool
    # A stop frees the sandbox's files (reaping deletes rather than stops).
    stop_frees_files: bool
    # The snapshots it can capture, the first the default.
    snapshot_modes: tuple[str, ...]
    # Its sandboxes' machine (`platform.machine()`); "": the worker's own.
    machine: str = ""


LOCAL = ProviderTraits(
    name="local",
    label="local",
    host_bound=True,
    mounts_worker_folders=True,
    reaches_worker_loopback=True,
    worker_isolates=True,
    counted_per_key=False,
    cli_from_template=False,
    egress_secrets=False,
    api_ranges=False,
    keeps_account=False,
    stop_frees_files=True,
    snapshot_modes=("disk",),
)
RUNTIME = ProviderTraits(
    name="runtime",
    label="Runtime",
    host_bound=False,
    mounts_worker_folders=False,
    reaches_worker_loopback=False,
    worker_isolates=False,
    counted_per_key=True,
    cli_from_template=True,
    egress_secrets=True,
    api_ranges=True,
    keeps_account=True,
    stop_frees_files=False,
    snapshot_modes=("memory", "disk"),
    machine="x86_64",  # its image builds say TARGETARCH amd64
)
PROVIDERS: dict[str, ProviderTraits] = {p.name: p for p in (LOCAL, RUNTIME)}


def traits(provider: str) -> ProviderTraits:
    """The traits of `provider`; an unknown name has none of them (the spec refuses it)."""
    return PROVIDERS.get(provider, _NONE)


_NONE = ProviderTraits(
    name="",
    label="",
    host_bound=False,
    mounts_worker_folders=False,
    reaches_worker_loopback=False,
    worker_isolates=False,
    counted_per_key=False,
    cli_from_template=False,
    egress_secrets=False,
    api_ranges=False,
    keeps_account=False,
    stop_frees_files=False,
    snapshot_modes=("disk",),
)
