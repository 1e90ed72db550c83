"""Claude Code, a coding-agent kind: its CLI (`cli`) and how its spend is counted (`spend`)."""

from .cli import ClaudeCode

__all__ = ["ClaudeCode"]
