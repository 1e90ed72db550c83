"""How commands reach the Temporal server (`overnight --address/--namespace`, else Temporal's
environment configuration), and the Web UI page of a run there."""

from __future__ import annotations

import argparse
import os

from temporalio.client import Client

from overnight.core.connect import UI_URL_ENV, default_ui_base, web_ui_url


async def connect(args: argparse.Namespace) -> Client:
    from overnight.core.connect import connect as dial

    return await dial(args.address, args.namespace)


def ui_url(client: Client, run_id: str) -> str | None:
    address = client.service_client.config.target_host
    base = default_ui_base(address, os.environ.get(UI_URL_ENV) or _dev_ui_for(address))
    return web_ui_url(base, client.namespace, run_id) if base else None


def _dev_ui_for(address: str) -> str | None:
    """The Web UI of the dev server in temporal-dev.yaml, when that is where we are connected."""
    from overnight.worker.devconfig import DevConfigError, default_dev_config

    try:
        config = default_dev_config()
    except DevConfigError:
        return None
    same = address.rsplit(":", 1)[-1] == str(config.port)
    return config.ui_url if same and config.ui else None
