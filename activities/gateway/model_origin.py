"""What the gateway's model routes serve a sandbox: the `model` entry of its record
(`sandbox.json`), written by whoever makes the sandbox, read by service.py
(`running_model_origin`) for a running sandbox only.

    "model": {"upstream": "https://api.anthropic.com", "credential_env": "ANTHROPIC_API_KEY",
              "run_id": "run-1", "cap_usd": 5.0, "credential_header": "x-api-key"}

`upstream` is the base URL answers come from (empty: the vendor's own, by route); a base that
ends in `/v1` (OpenAI's convention) is the same as one without. `credential_env` names the
worker's variable holding the key (empty: none is sent, e.g. a fake). `cap_usd` is the run's
model spend cap (null: none).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# How the worker's credential is sent on the Messages route: an API key (`x-api-key`), or a
# bearer token (a Claude subscription's OAuth token, `ANTHROPIC_AUTH_TOKEN`). The OpenAI routes
# always send a bearer token.
CREDENTIAL_HEADERS = ("x-api-key", "bearer")


@dataclass(frozen=True)
class ModelOrigin:
    upstream: str
    credential_env: str
    run_id: str
    cap_usd: float | None = None
    credential_header: str = "x-api-key"


def model_origin_of(record: object) -> ModelOrigin | None:
    """The entry as the gateway serves it; None when it is not one (the sandbox is refused)."""
    if not isinstance(record, dict):
        return None
    upstream = record.get("upstream", "")
    credential_env = record.get("credential_env", "")
    run_id = record.get("run_id")
    cap: Any = record.get("cap_usd")
    if not isinstance(upstream, str) or not isinstance(credential_env, str):
        return None
    if upstream and not upstream.startswith(("http://", "https://")):
        return None
    if credential_env and not ENV_NAME.match(credential_env):
        return None
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        return None
    header = record.get("credential_header", "x-api-key")
    if header not in CREDENTIAL_HEADERS:
        return None
    if cap is not None:
        if isinstance(cap, bool) or not isinstance(cap, int | float) or not math.isfinite(cap):
            return None
        cap = max(0.0, float(cap))
    return ModelOrigin(upstream, credential_env, run_id, cap, str(header))
