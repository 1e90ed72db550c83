"""Where a run's notifications go, as a spec says it: the `notify` field of `RunSpec`.

Plain data, validated without looking at the network or the worker's environment (a spec is
validated inside the workflow too). A target names its URL directly (`url`, then it is in the
run's history, like the rest of the spec) or by a variable of the worker's environment
(`url_env`, for URLs that are themselves secrets, such as Slack incoming webhooks).
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_WEBHOOKS = 10
# The worker's variable holding the signing secret of every target that names none.
DEFAULT_SECRET_ENV = "OVERNIGHT_NOTIFY_SECRET"
NotifyFormat = Literal["json", "slack"]
# What a notification is about: the states a run enters that a person may need to hear of.
NotifyEvent = Literal[
    "needs_attention", "failed", "finished", "cancelled", "restart", "waiting_for_answer"
]


def check_url(value: str, where: str = "url") -> str:
    """An absolute http(s) URL with a host, or ValueError naming `where`."""
    if "\x00" in value or any(c.isspace() for c in value):
        raise ValueError(f"{where} may not contain spaces or NUL bytes")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{where} must be an http:// or https:// URL with a host")
    return value


class Webhook(BaseModel):
    """One receiver of a run's notifications (a JSON POST, signed; see docs/notifications.md)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    url: str | None = None
    # The worker's variable holding the URL, read when sending (never in history).
    url_env: str | None = None
    format: NotifyFormat = "json"
    # Also told of every restart (else only: needs_attention, failed, finished, cancelled).
    on_restart: bool = False
    # The worker's variable holding the signing secret (default OVERNIGHT_NOTIFY_SECRET); a
    # name the worker allows (`OVERNIGHT_SECRET_ENV`, overnight/core/grants.py).
    secret_env: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @field_validator("url_env", "secret_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(f"{value!r} is not a valid variable name")
        return value

    @model_validator(mode="after")
    def _one_url(self) -> Webhook:
        if (self.url is None) == (self.url_env is None):
            raise ValueError("give exactly one of url and url_env")
        return self

    def wants(self, event: NotifyEvent) -> bool:
        return event != "restart" or self.on_restart


def webhooks_from_input(value: Any) -> Any:
    """A plain URL string is shorthand for `{"url": ...}`."""
    if isinstance(value, list):
        return [{"url": item} if isinstance(item, str) else item for item in value]
    return value
