"""The worker's host settings, read from its environment (overnight.core.hosts names them)."""

from __future__ import annotations

import os
import socket

from overnight.core.hosts import (
    DEFAULT_HOST_LOST_SECONDS,
    HOST_ENV,
    HOST_LOST_ENV,
    HOST_NAME,
    HOST_NAME_RULE,
    MIN_HOST_LOST_SECONDS,
)


class BadHostSetting(ValueError):
    """`OVERNIGHT_HOST` or `OVERNIGHT_HOST_LOST_SECONDS` cannot be read."""


def this_host() -> str:
    """`OVERNIGHT_HOST`, else the machine's host name."""
    name = os.environ.get(HOST_ENV, "").strip() or socket.gethostname()
    if not HOST_NAME.match(name):
        raise BadHostSetting(f"{HOST_ENV}={name!r}: a host name is {HOST_NAME_RULE}")
    return name


def host_lost_seconds() -> float:
    """`OVERNIGHT_HOST_LOST_SECONDS` (default 180, at least 5)."""
    raw = os.environ.get(HOST_LOST_ENV, "").strip()
    if not raw:
        return DEFAULT_HOST_LOST_SECONDS
    try:
        value = float(raw)
    except ValueError:
        raise BadHostSetting(f"{HOST_LOST_ENV}={raw!r} is not a number of seconds") from None
    if not value >= MIN_HOST_LOST_SECONDS:
        raise BadHostSetting(f"{HOST_LOST_ENV}={raw!r}: at least {MIN_HOST_LOST_SECONDS:g}")
    return value
