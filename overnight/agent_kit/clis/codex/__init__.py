"""Codex, a coding-agent kind: its CLI (`cli`) and how its spend is counted (`spend`)."""

from .cli import Codex

__all__ = ["Codex"]
