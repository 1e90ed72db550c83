"""The host paths of a spec (`repo` as a local path, `agent_dir`, `binds[].path`): one rule
for all of them.

A spec file's relative paths are taken from the file's folder (`specs.resolve_relative_paths`, on
the CLI and in tasks files). A spec built in code, or sent by any client, has no folder: there
a relative path would mean the worker's current folder, which nobody chose, so `RunSpec`
refuses it (`check_host_path`) before anything starts. (Pure: no `os`, no `pathlib`; the
decisions import the models.)
"""

from __future__ import annotations

# The top-level fields that name a folder on the worker's machine (`repo` when it is no URL).
HOST_PATH_FIELDS = ("repo", "agent_dir")


def is_url(value: str) -> bool:
    """A URL (`https://`, `file://`) or git's scp-like `user@host:path`, not a local path."""
    return "://" in value or ":" in value.split("/")[0]


def is_relative_local_path(value: str) -> bool:
    return bool(value) and not is_url(value) and not value.startswith("/")


def check_host_path(value: str, field: str) -> str:
    """`value` as a host path field may hold it, else ValueError saying what to write."""
    if is_url(value) or not value:
        return value
    if is_relative_local_path(value):
        raise ValueError(
            f"{value!r} is a relative path, and a spec built in code has no folder to take it "
            "from: give an absolute path (a spec file's relative paths are taken from its "
            "folder)"
        )
    if ".." in value.replace("\\", "/").split("/"):
        raise ValueError(f"{field} may not contain '..' (name the folder directly)")
    return value
