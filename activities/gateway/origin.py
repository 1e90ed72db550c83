"""A sandbox's origin as the gateway serves it (git_http.py, git_forward.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Origin:
    """A sandbox's origin as the gateway serves it: a folder on this host (`path`) or an
    http(s) URL (`url`, with the name of the worker's variable holding its credential), the
    run's branch, its run."""

    path: str
    branch: str
    run_id: str
    url: str = ""
    credential_env: str = ""

    @property
    def name(self) -> str:
        """The last part of its path, which the gateway serves it under."""
        where = urlsplit(self.url).path if self.url else self.path
        return Path(where.rstrip("/")).name or "origin"
