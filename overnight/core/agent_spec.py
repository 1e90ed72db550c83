"""A real coding agent in a `RunSpec` (`agent`): Claude Code or Codex, run by overnight's
adapter in the sandbox instead of an `agent_dir` and a `command` of one's own.

The model is a contract (tests outside this repository write it): `kind`, `prompt`, `model`,
`max_turns`, `base_url`. Credentials never appear here: they come through the spec's
`secret_env`, granted by the worker, as for every agent. `check_agent_way` is the cross-check
`RunSpec` makes: exactly one way of running the agent, `agent` or `agent_dir` + `command`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from overnight.core.agent_kinds import AgentKind
from overnight.core.model_base import _StrictInput

MAX_PROMPT_CHARS = 100_000
MAX_TURNS = 10_000
MAX_MODEL_CHARS = 200
MAX_BASE_URL_CHARS = 2048
# The adapter's exit code for a loop it caught (the same tool call with the same input many
# times in a row), beside the agent contract's 0 (done) and 75 (a fresh context): a restart
# whose reason is the loop its last note names (workflows.pure.decide).
LOOP_EXIT_CODE = 76
# ... and for a fresh context, as the agent contract's default.
FRESH_CONTEXT_EXIT_CODE = 75
# How that restart's reason begins (a cause of its own in the status, metrics and report).
LOOP_REASON = "agent looped"
# A model name as the CLIs take it: `claude-sonnet-4-5`, `gpt-5.5-codex`, `openai/gpt-5`.
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")


class CodingAgent(_StrictInput):
    """Which CLI, what to do, and the settings handed to it as its own."""

    kind: AgentKind
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    # Empty: the CLI's default model.
    model: str = Field(default="", max_length=MAX_MODEL_CHARS)
    # The model turns one CLI process may take before it starts again with a fresh context
    # (0: no cap).
    max_turns: int = Field(default=0, ge=0, le=MAX_TURNS)
    # Empty: the vendor's API; else a gateway (or a fake) the CLI is pointed at.
    base_url: str = Field(default="", max_length=MAX_BASE_URL_CHARS)

    @field_validator("prompt")
    @classmethod
    def _prompt_passes(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("prompt contains a NUL byte")
        if not value.strip():
            raise ValueError("prompt is only blank space")
        return value

    @field_validator("model")
    @classmethod
    def _model_is_a_name(cls, value: str) -> str:
        if value and not _MODEL.match(value):
            raise ValueError(
                f"model {value!r} is not a model name (letters, digits and . _ : / @ + -)"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url_is_http(cls, value: str) -> str:
        return check_http_base_url(value, "base_url")


def check_http_base_url(value: str, field: str) -> str:
    """A model API's base URL as a spec may give it (empty: the vendor's own); ValueError
    naming `field` otherwise."""
    if not value:
        return value
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"{field} may not contain spaces or control characters")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as error:
        raise ValueError(f"{field} is not a URL ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{field} must be an http:// or https:// URL with a host (got {value!r})")
    if "@" in parts.netloc:
        raise ValueError(
            f"{field} may not carry credentials (user:password@): give them through secret_env"
        )
    if port == 0:
        raise ValueError(f"{field}'s port may not be 0")
    return value


def check_agent_way(
    agent: CodingAgent | None, agent_dir: str, command: str, fresh_context_exit_code: int = 75
) -> None:
    """Exactly one way to run the agent; ValueError naming the fields otherwise. A coding
    agent's adapter speaks the agent contract's default exit codes (75: a fresh context, 76:
    a loop), so a spec with `agent` keeps the default `fresh_context_exit_code`."""
    if agent is not None:
        if fresh_context_exit_code != FRESH_CONTEXT_EXIT_CODE:
            raise ValueError(
                f"fresh_context_exit_code: a coding agent's adapter exits "
                f"{FRESH_CONTEXT_EXIT_CODE} for a fresh context: leave it out with agent"
            )
        given = [name for name, value in (("agent_dir", agent_dir), ("command", command)) if value]
        if given:
            raise ValueError(
                f"agent: {' and '.join(given)} must be left out with agent (overnight runs the "
                "coding agent itself): give agent, or agent_dir and command, not both"
            )
        return
    missing = [
        name for name, value in (("agent_dir", agent_dir), ("command", command)) if not value
    ]
    if len(missing) == 2:
        raise ValueError(
            "agent: a spec needs agent (a coding agent: claude-code or codex), or agent_dir "
            "and command (an agent of your own): it gives neither"
        )
    if missing:
        other = "command" if missing[0] == "agent_dir" else "agent_dir"
        raise ValueError(f"{missing[0]}: required with {other} (or give agent instead of both)")
