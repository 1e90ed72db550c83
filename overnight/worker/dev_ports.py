"""The dev server's ports: whether something else holds them, and free ones to move to when
the default is taken.

A port chosen on purpose (`--port`) that something else holds fails at once; the file's or
the built-in default moves to the next free pair (gRPC port P, Web UI P + 1000, as the Web UI
link of every command expects) and says so, with the `export TEMPORAL_ADDRESS=...` to use.
"""

from __future__ import annotations

import socket

from overnight.worker.devconfig import DevConfig

# The Web UI's port is the gRPC port + this, as Temporal's dev server has it by default.
UI_OFFSET = 1000
# How far past the default a free pair is looked for.
SEARCH_SPAN = 200


def with_port(config: DevConfig, port: int | None, ui_port: int | None = None) -> DevConfig:
    """`config` on `port` (its Web UI on `ui_port`, else `port` + 1000 when that is a port)."""
    if port is None and ui_port is None:
        return config
    if ui_port is None and port is not None and port + UI_OFFSET <= 65535:
        ui_port = port + UI_OFFSET
    return config.with_overrides(port=port, ui_port=ui_port)


def port_free(ip: str, port: int) -> bool:
    """True when this machine can listen on `ip:port` now (as the server would)."""
    host = "127.0.0.1" if ip in ("", "0.0.0.0") else ip.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def held_ports(config: DevConfig) -> list[int]:
    """Which of the server's ports something already listens on."""
    wanted = [config.port] + ([config.ui_port] if config.ui else [])
    return [port for port in wanted if not port_free(config.ip, port)]


def free_pair(config: DevConfig) -> DevConfig:
    """`config` moved to the first free gRPC port past its own whose Web UI port (+ 1000) is
    free too; else to any two free ports the system gives."""
    for port in range(config.port + 1, min(config.port + SEARCH_SPAN, 65535 - UI_OFFSET)):
        moved = with_port(config, port)
        if not held_ports(moved):
            return moved
    return config.with_overrides(port=_any_free(config.ip), ui_port=_any_free(config.ip))


def _any_free(ip: str) -> int:
    host = "127.0.0.1" if ip in ("", "0.0.0.0") else ip.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def moved_lines(moved_from: str | None, config: DevConfig) -> list[str]:
    """What a person must know when the server moved off a held port: where it is, and what
    to export so that every other command finds it."""
    if moved_from is None:
        return []
    lines = [
        f"{moved_from} is held by another program, so the dev server is at {config.address}; "
        "in other shells:",
        f"  export TEMPORAL_ADDRESS={config.address}",
    ]
    if config.ui and config.ui_port != config.port + UI_OFFSET:
        lines.append(f"  export OVERNIGHT_UI_URL={config.ui_url}")
    return lines
