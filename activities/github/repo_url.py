"""Which GitHub repository a run's origin is, and where its API is. Pure.

An origin is written many ways: `https://github.com/octo/app.git`, with a user or a token
in it (`https://x-access-token:…@github.com/octo/app`), `git@github.com:octo/app.git`,
`ssh://git@github.com:22/octo/app.git`. Any other host is taken for a GitHub Enterprise
Server, whose API is `https://HOST/api/v3` (github.com's is `https://api.github.com`).
Credentials in the URL are dropped: they never reach the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

GITHUB_HOST = "github.com"
GITHUB_API_URL = "https://api.github.com"
ENTERPRISE_API_PATH = "/api/v3"
# An owner: letters, digits and hyphens on github.com; Enterprise (managed users) adds `_`
# and longer names, so the check is the wider one. A repository name: letters, digits,
# `.`, `_` and `-` (100 at most), never `.` or `..`.
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
# `user@host:owner/name`: git's scp-like form of ssh.
_SCP_LIKE = re.compile(r"(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>[^/].*)")


@dataclass(frozen=True)
class GitHubRepo:
    host: str  # github.com, or the Enterprise server's host (with its port, if any)
    owner: str
    name: str
    scheme: str = "https"  # of the web and API addresses (http only as the URL said)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def api_url(self) -> str:
        return api_url_for(self.host, self.scheme)

    def head_label(self, branch: str) -> str:
        """The `head` filter of a pull request from `branch` of this repository."""
        return f"{self.owner}:{branch}"


def api_url_for(host: str, scheme: str = "https") -> str:
    if host.lower() in (GITHUB_HOST, "www.github.com"):
        return GITHUB_API_URL
    return f"{scheme}://{host}{ENTERPRISE_API_PATH}"


def parse_repo_url(url: str) -> GitHubRepo:
    """The repository of a git origin URL (https, http, ssh, or git's `user@host:path`).
    ValueError, naming what is wrong (never the credentials), when it names none."""
    text = url.strip()
    scheme = "https"
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in ("https", "http", "ssh", "git", "git+ssh", "ssh+git"):
            raise ValueError(f"not a GitHub repository URL (scheme {parts.scheme!r})")
        host = parts.hostname or ""
        if parts.port is not None and parts.scheme in ("https", "http"):
            host = f"{host}:{parts.port}"  # an Enterprise server on its own port
        if parts.scheme == "http":
            scheme = "http"
        path = parts.path
    else:
        found = _SCP_LIKE.fullmatch(text)
        if found is None:
            raise ValueError("not a GitHub repository URL (no host)")
        host, path = found["host"], found["path"]
    if not host:
        raise ValueError("not a GitHub repository URL (no host)")
    owner, name = _owner_and_name(path)
    return GitHubRepo(host=host.lower(), owner=owner, name=name, scheme=scheme)


def parse_full_name(text: str) -> tuple[str, str]:
    """`owner/name` as written in a spec; ValueError if it is not one."""
    return _owner_and_name(text)


def _owner_and_name(path: str) -> tuple[str, str]:
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) != 2:
        raise ValueError(
            "not a GitHub repository URL (its path should be /OWNER/NAME, has "
            f"{len(parts)} part{'s' if len(parts) != 1 else ''})"
        )
    owner, name = parts
    if name.endswith(".git"):
        name = name[: -len(".git")]
    if not _OWNER.fullmatch(owner):
        raise ValueError(f"not a GitHub owner: {owner[:40]!r}")
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"not a GitHub repository name: {name[:100]!r}")
    return owner, name
