"""The coding-agent adapter's config (`coding_agent.py --config PATH`, JSON), read and checked
whole before anything starts: a config the adapter cannot run is one line saying why, and exit
2, never a CLI started on half of it. Its fields are told in `coding_agent.py`.

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import overnight_agent as kit
else:  # in the sandbox: sibling modules
    import clis
    import overnight_agent as kit

DEFAULT_API_BACKOFF = [30.0, 60.0, 120.0, 300.0, 600.0]


class ConfigError(Exception):
    """The config cannot be run; the message says why."""


class Config:
    """The adapter's settings, each checked as it is read (`ConfigError` names the first wrong)."""

    def __init__(self, values: dict[str, Any], path: str) -> None:
        def text(name: str, default: str = "") -> str:
            value = values.get(name, default)
            if value is None:
                return default
            if not isinstance(value, str):
                raise ConfigError(f"{name} must be text, not {type(value).__name__}")
            return value

        def number(name: str, default: float, least: float = 0) -> float:
            value = values.get(name, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < least:
                raise ConfigError(f"{name} must be a number >= {least:g}")
            return float(value)

        self.path = path
        self.kind = text("kind")
        if self.kind not in clis.CLIS:
            raise ConfigError(f"kind must be one of {', '.join(clis.CLIS)}, not {self.kind!r}")
        self.prompt = text("prompt")
        if not self.prompt.strip():
            raise ConfigError("prompt is empty")
        self.model = text("model")
        self.max_turns = int(number("max_turns", 0))
        self.base_url = text("base_url")
        self.cli = text("cli")
        if not os.path.isabs(self.cli) or not os.access(self.cli, os.X_OK):
            raise ConfigError(f"the {self.kind} CLI is not an executable at {self.cli!r}")
        self.run_id = text("run_id") or kit.run_id()
        self.cwd = text("cwd") or os.getcwd()
        if not os.path.isdir(self.cwd):
            raise ConfigError(f"cwd {self.cwd!r} is not a folder")
        self.branch = text("branch") or f"agent/{self.run_id}"
        self.checkpoint_path = text("checkpoint_path") or kit.checkpoint_path()
        self.loop_repeats = int(number("loop_repeats", 8, least=2))
        prices = values.get("prices") or {}
        if not isinstance(prices, dict):
            raise ConfigError("prices must be an object of models")
        self.prices: dict[str, Any] = prices
        self.usage_backoff_seconds = number("usage_backoff_seconds", 900)
        backoff = values.get("api_backoff_seconds", DEFAULT_API_BACKOFF)
        if (
            not isinstance(backoff, list)
            or not backoff
            or not all(isinstance(v, (int, float)) and v >= 0 for v in backoff)
        ):
            raise ConfigError("api_backoff_seconds must be a list of seconds")
        self.api_backoff_seconds = [float(v) for v in backoff]
        self.session_store = text("session_store")

    @classmethod
    def load(cls, path: str) -> Config:
        try:
            with open(path, encoding="utf-8") as source:
                values = json.load(source)
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read the config {path}: {error}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"the config {path} is not a JSON object")
        return cls(values, path)
