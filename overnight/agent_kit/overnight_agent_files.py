"""The agent kit's files, written whole or not at all, and read without trusting them.

A sibling of `overnight_agent`, apart so that the kit's modules share one atomic write (the
checkpoint, the requests file, the coding-agent adapter's own files) without importing each
other. Standard library only, Python 3.8 or newer, like the kit.

`write_whole` writes a temp file in the same folder, fsyncs it, renames it over the file and
fsyncs the folder: a crash at any moment leaves the previous file or the new one, never a torn
one. What is read back (a checkpoint another process wrote, the requests file) is taken only in
the shapes the kit expects: anything else is as if absent.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def write_whole(path: str, text: str, prefix: str = ".checkpoint-") -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (where the platform allows opening a folder)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def load_values(path: str) -> dict[str, Any]:
    """The JSON object in `path`; empty when there is none (or it is not one)."""
    try:
        with open(path, encoding="utf-8") as source:
            values = json.load(source)
    except (OSError, ValueError):
        return {}
    return values if isinstance(values, dict) else {}


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def as_text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
