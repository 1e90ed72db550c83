"""One way to get a Temporal client (Temporal's environment configuration, pydantic payloads,
encrypted when `OVERNIGHT_CODEC_KEYS` is set: overnight.core.codec), and where its Web UI shows a
run.

`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, the TLS variables and
`temporal.toml` profiles (`TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`) all work, so the same code
talks to the local dev server, a self-hosted cluster or Temporal Cloud.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote

from temporalio.client import Client, Interceptor
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

from overnight.core.codec import data_converter
from overnight.core.constants import DEFAULT_ADDRESS
from overnight.core.errors import ServerUnreachable

# Names the Web UI's base where it is neither the dev server's nor Temporal Cloud's.
UI_URL_ENV = "OVERNIGHT_UI_URL"


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    *,
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """Connect with the environment's configuration; explicit arguments win over it.
    `runtime` and `interceptors`: the worker's telemetry (overnight/worker/telemetry.py). A bad
    `OVERNIGHT_CODEC_KEYS` is refused (`CodecConfigError`) before anything is dialled."""
    converter = data_converter()
    config = ClientConfig.load_client_connect_config()
    if address:
        config["target_host"] = address
    config.setdefault("target_host", DEFAULT_ADDRESS)
    if namespace:
        config["namespace"] = namespace
    try:
        return await Client.connect(
            **config,
            data_converter=converter,
            runtime=runtime,
            interceptors=interceptors,
        )
    except RuntimeError as err:
        said = unreachable(str(config["target_host"]), str(err))
        if said is None:
            raise
        raise ServerUnreachable(said) from err


def unreachable(address: str, error: str) -> str | None:
    """The SDK's transport error (`Failed client connect: ... tonic::transport::Error(...)`)
    as one line saying what to do; None for any other error (TLS, a key: those say enough)."""
    if "Failed client connect" not in error or "transport" not in error:
        return None
    hint = "start one with `overnight dev`, or set TEMPORAL_ADDRESS / `--address`"
    if "dns error" in error:
        return f"cannot find the host of {address} (no such name): {hint}"
    if "ConnectionRefused" in error or "Connection refused" in error:
        return f"no Temporal server at {address}: {hint}"
    reason = _REASON.search(error)
    return f"cannot reach a Temporal server at {address}" + (
        f" ({reason.group(1)}): {hint}" if reason else f": {hint}"
    )


_REASON = re.compile(r'message: "([^"]{1,80})"')


def web_ui_url(ui_base: str, namespace: str, run_id: str) -> str:
    base = ui_base.rstrip("/")
    return f"{base}/namespaces/{quote(namespace, safe='')}/workflows/{quote(run_id, safe='')}"


def default_ui_base(address: str, override: str | None = None) -> str | None:
    """Where the Web UI for `address` probably is: the dev server's (gRPC port + 1000), or Cloud."""
    if override:
        return override
    host, _, port = address.rpartition(":")
    if host in ("localhost", "127.0.0.1", "[::1]", "0.0.0.0") and port.isdigit():
        return f"http://{'localhost' if host == '0.0.0.0' else host}:{int(port) + 1000}"
    if host.endswith(".tmprl.cloud"):
        return "https://cloud.temporal.io"
    return None
