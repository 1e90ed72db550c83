"""Gemini CLI, a coding-agent kind: its CLI (`cli`) and how its spend is counted (`spend`)."""

from .cli import Gemini

__all__ = ["Gemini"]
