"""temporal-dev.yaml: the local dev server's settings, and the `temporal server start-dev` args.

Loading is strict on purpose: a typo in the file (`ui_prot: 8233`) is refused with the key's
name instead of being silently ignored and leaving the server on a default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, cast

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictInt,
    StringConstraints,
    ValidationError,
    field_validator,
)

from overnight.core.constants import SEARCH_ATTRIBUTE_TYPES
from overnight.core.home import expand_path

SearchAttributeType = Literal["Text", "Keyword", "Int", "Double", "Bool", "Datetime", "KeywordList"]
LogLevel = Literal["debug", "info", "warn", "error", "never"]
Port = Annotated[StrictInt, Field(ge=1, le=65535)]
Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
DynamicConfigKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_.]*$")]

# Hosts a server listens on that a client cannot dial; connect through loopback instead.
_WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


class DevConfigError(ValueError):
    """temporal-dev.yaml is missing, unreadable or has a bad key or value."""


class DevConfig(BaseModel):
    """The settings of the local Temporal dev server (one field per key of temporal-dev.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ip: str = "127.0.0.1"
    port: Port = 7233
    ui_port: Port = 8233
    ui: StrictBool = True
    namespace: Annotated[str, StringConstraints(min_length=1)] = "default"
    db_file: Path = Field(Path("${OVERNIGHT_HOME}/temporal/dev.sqlite"), validate_default=True)
    log_file: Path = Field(Path("${OVERNIGHT_HOME}/temporal/dev-server.log"), validate_default=True)
    log_level: LogLevel = "warn"
    # The journal its SQLite store keeps. Write-ahead logging is as durable (synchronous stays
    # FULL) at half the server's CPU for the same runs (bench/dev_server_journal.py); "delete",
    # the server's own default, is for a store on a network filesystem, where WAL does not work.
    sqlite_journal_mode: Literal["wal", "delete"] = "wal"
    # Defaults to overnight's own, so a missing temporal-dev.yaml still gives a useful server.
    search_attributes: dict[Identifier, SearchAttributeType] = Field(
        default_factory=lambda: cast(dict[str, SearchAttributeType], dict(SEARCH_ATTRIBUTE_TYPES)),
        validate_default=True,
    )
    dynamic_config: dict[DynamicConfigKey, JsonValue] = {}
    ui_disable_news_fetch: StrictBool = True
    # The codec server the Web UI decodes payloads through (`overnight codec-server`), when
    # payloads are encrypted (OVERNIGHT_CODEC_KEYS); None: the UI shows them as stored.
    ui_codec_endpoint: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")] | None = None
    startup_timeout_seconds: Annotated[float, Field(gt=0)] = 60.0

    @field_validator("db_file", "log_file", mode="before")
    @classmethod
    def _expand(cls, value: object) -> object:
        return expand_path(str(value)) if isinstance(value, str | Path) else value

    @property
    def address(self) -> str:
        """host:port a client dials to reach this server's gRPC frontend."""
        return f"{_dial_host(self.ip)}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{_dial_host(self.ip)}:{self.ui_port}"

    def with_overrides(
        self,
        *,
        port: int | None = None,
        ui_port: int | None = None,
        db_file: Path | None = None,
        log_file: Path | None = None,
        ui_codec_endpoint: str | None = None,
    ) -> DevConfig:
        """A copy with some settings replaced (tests use free ports and a temporary database)."""
        changes: dict[str, object] = {
            "port": port,
            "ui_port": ui_port,
            "db_file": db_file,
            "log_file": log_file,
            "ui_codec_endpoint": ui_codec_endpoint,
        }
        merged = self.model_dump() | {k: v for k, v in changes.items() if v is not None}
        return DevConfig.model_validate(merged)

    def start_dev_args(self, binary: Path | str) -> list[str]:
        """The full command line: `<binary> server start-dev ...`."""
        args = [
            str(binary),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--namespace",
            self.namespace,
            "--db-filename",
            str(self.db_file),
            "--sqlite-pragma",
            f"journal_mode={self.sqlite_journal_mode}",
            "--log-level",
            self.log_level,
        ]
        if self.ui:
            args += ["--ui-port", str(self.ui_port)]
            if self.ui_disable_news_fetch:
                args.append("--ui-disable-news-fetch")
            if self.ui_codec_endpoint:
                args += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        else:
            args.append("--headless")
        for name, kind in self.search_attributes.items():
            args += ["--search-attribute", f"{name}={kind}"]
        for key, value in self.dynamic_config.items():
            args += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        return args


def load_dev_config(path: Path | str) -> DevConfig:
    """Read and check temporal-dev.yaml; any problem is a `DevConfigError` naming the key."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DevConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise DevConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise DevConfigError(f"{path}: expected a mapping of keys, got {type(data).__name__}")
    try:
        return DevConfig.model_validate(data)
    except ValidationError as exc:
        raise DevConfigError(f"{path}: {describe_errors(exc)}") from exc


def describe_errors(exc: ValidationError) -> str:
    """One line per problem, each starting with the offending key (`ui_prot: unknown key`)."""
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key")
        else:
            lines.append(f"{key}: {error['msg']} (got {error['input']!r})")
    return "; ".join(lines)


def _dial_host(ip: str) -> str:
    if ip in _WILDCARD_HOSTS:
        return "127.0.0.1"
    return f"[{ip}]" if ":" in ip else ip


DEV_CONFIG_NAME = "temporal-dev.yaml"


def default_dev_config() -> DevConfig:
    """temporal-dev.yaml in the current folder, else the repo's (beside the overnight package),
    else the built-in defaults (which match the repo's file)."""
    return find_dev_settings().config


@dataclass(frozen=True)
class DevSettings:
    """The dev server's settings and where they came from (None: the built-in defaults)."""

    config: DevConfig
    source: Path | None

    def describe(self) -> str:
        if self.source is None:
            return "dev server settings: built-in defaults (no temporal-dev.yaml found)"
        return f"dev server settings: {self.source}"


def repo_dev_config_path() -> Path:
    return Path(__file__).resolve().parents[2] / DEV_CONFIG_NAME


def find_dev_settings(path: Path | str | None = None) -> DevSettings:
    """`path`, else temporal-dev.yaml in the current folder (it wins), else the repo's, else
    the built-in defaults."""
    if path is not None:
        return DevSettings(load_dev_config(path), Path(path).resolve())
    for candidate in (Path(DEV_CONFIG_NAME), repo_dev_config_path()):
        if candidate.is_file():
            return DevSettings(load_dev_config(candidate), candidate.resolve())
    return DevSettings(DevConfig(), None)
