"""How a local sandbox is isolated, as a spec says it: `isolation` and `binds` of `RunSpec`.

Plain data, validated without looking at the disk: a spec is validated inside the workflow
too. Whether a bind exists is checked where it is mounted, by the worker.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from overnight.core.provider_traits import traits

# "bubblewrap": the default, refused where bwrap cannot run; "none": no isolation, on purpose.
Isolation = Literal["bubblewrap", "none"]
MAX_BINDS = 32
# Most host loopback ports one sandbox may reach (`RunSpec.host_ports`).
MAX_HOST_PORTS = 16
# Paths the sandbox itself provides: a bind there would hide them.
SANDBOX_OWNED = ("/workspace", "/proc", "/dev")


class HostBind(BaseModel):
    """A host path shown in a local sandbox at the same path: read-only unless `writable`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    path: str
    writable: bool = False

    @field_validator("path")
    @classmethod
    def _a_host_path(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("bind path contains a NUL byte")
        if not value.startswith("/"):
            raise ValueError(f"bind path {value!r} must be absolute")
        normal = "/" + posixpath.normpath(value).lstrip("/")
        if normal == "/":
            raise ValueError("bind path may not be / (the whole host)")
        for owned in SANDBOX_OWNED:
            if normal == owned or normal.startswith(owned + "/"):
                raise ValueError(f"bind path {value!r} is under {owned}, which the sandbox owns")
        return normal


def check_binds(binds: list[HostBind], provider: str) -> None:
    """What a list of binds may not be, whatever its paths are (ValueError, one line)."""
    if binds and not traits(provider).mounts_worker_folders:
        raise ValueError("binds: host paths can be bound into local sandboxes only")
    seen: set[str] = set()
    for bind in binds:
        if bind.path in seen:
            raise ValueError(f"binds: {bind.path} is listed twice")
        seen.add(bind.path)


def check_host_ports(ports: list[int], provider: str) -> None:
    """What `host_ports` may not be (ValueError, one line): each a TCP port, once, and only
    for local sandboxes (a Runtime sandbox has no way to the worker's loopback)."""
    if ports and not traits(provider).reaches_worker_loopback:
        raise ValueError("host_ports: only local sandboxes reach ports on the worker's loopback")
    seen: set[int] = set()
    for port in ports:
        if not 1 <= port <= 65535:
            raise ValueError(f"host_ports: {port} is not a TCP port (1-65535)")
        if port in seen:
            raise ValueError(f"host_ports: {port} is listed twice")
        seen.add(port)


def is_under(path: str, roots: Sequence[str]) -> bool:
    """Whether `path` is one of `roots` or inside one (by name: no link is followed)."""
    path = posixpath.normpath(path)
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)
