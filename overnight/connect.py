"""One way to get a Temporal client: Temporal's environment configuration, pydantic payloads.

`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, the TLS variables and
`temporal.toml` profiles (`TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`) all work, so the same code
talks to the local dev server, a self-hosted cluster or Temporal Cloud.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig

from overnight.constants import DEFAULT_ADDRESS


async def connect(address: str | None = None, namespace: str | None = None) -> Client:
    """Connect with the environment's configuration; explicit arguments win over it."""
    config = ClientConfig.load_client_connect_config()
    if address:
        config["target_host"] = address
    config.setdefault("target_host", DEFAULT_ADDRESS)
    if namespace:
        config["namespace"] = namespace
    return await Client.connect(**config, data_converter=pydantic_data_converter)
