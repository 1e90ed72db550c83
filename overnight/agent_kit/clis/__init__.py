"""The coding-agent CLIs the adapter (`coding_agent.py`) supervises: one package per kind,
each owning all of its behaviour (settings, command lines, session files, spend, turns,
resume, what its output lines mean) on the base in `base`, and `CLIS`, the one table of them.

A new kind is a package here (`cli.py` with its `Cli` subclass, `spend.py` when its spend is
counted its own way) and its row in `CLIS`; docs/layout.md says what else it needs outside
the kit (its row in the worker's table of CLIs, and its fake model API).

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

from .base import (
    API_ERROR,
    CONTEXT_FULL,
    ERROR,
    MAX_TURNS,
    SESSION_MISSING,
    SUCCESS,
    USAGE_LIMIT,
    AssistantText,
    Cli,
    Event,
    Finished,
    LimitHit,
    ModelMessage,
    Retrying,
    SessionStarted,
    TokenTotals,
    ToolFinished,
    ToolStarted,
    clip,
    next_clock_time,
)
from .claude_code import ClaudeCode
from .codex import Codex
from .gemini import Gemini

CLIS: dict[str, type[Cli]] = {cli.kind: cli for cli in (ClaudeCode, Codex, Gemini)}

__all__ = [
    "API_ERROR",
    "CLIS",
    "CONTEXT_FULL",
    "ERROR",
    "MAX_TURNS",
    "SESSION_MISSING",
    "SUCCESS",
    "USAGE_LIMIT",
    "AssistantText",
    "ClaudeCode",
    "Cli",
    "Codex",
    "Event",
    "Finished",
    "Gemini",
    "LimitHit",
    "ModelMessage",
    "Retrying",
    "SessionStarted",
    "TokenTotals",
    "ToolFinished",
    "ToolStarted",
    "clip",
    "next_clock_time",
]
