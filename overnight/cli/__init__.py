"""The roof: the `overnight` command and the client helpers it uses."""

from overnight.cli.main import main

__all__ = ["main"]
