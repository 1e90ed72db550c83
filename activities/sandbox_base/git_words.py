"""What a failed `git clone` said, in a few words a person reads at a glance, and whether any
retry could change it. Pure: git's stderr in, words out.

A repository that does not exist, or refuses who asks (404, 401/403, "not a git repository"),
answers the same way an hour later: the create fails at once. A server that does not answer
(connection refused, a name not resolved, a 5xx, a timeout) may answer in a minute, and a local
repository being pushed to is readable once the push ends: retried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each: git's words (as curl and git print them), ours, and whether a retry may change them.
_CAUSES: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), words, permanent)
    for pattern, words, permanent in (
        (r"returned error: 404|repository .* not found", "repository not found", True),
        # A local repository's folder it could not read: a push under way keeps its objects in
        # a folder only the pusher may read (git's quarantine) until it ends. Before the
        # permission words below, which git prints with it.
        (
            r"failed to iterate over '[^']*objects/'",
            "could not read the repository's objects (a push under way?)",
            False,
        ),
        (
            r"returned error: 40[13]|authentication failed|could not read username"
            r"|could not read password|permission denied",
            "access refused (authentication)",
            True,
        ),
        (
            r"does not exist|not a git repository|does not appear to be a git repository",
            "not a git repository",
            True,
        ),
        (
            r"connection refused|couldn't connect to server|failed to connect",
            "connection refused",
            False,
        ),
        # What a refused connection becomes through a sandbox's network relay.
        (
            r"empty reply from server|connection reset|recv failure",
            "the server did not answer (connection reset)",
            False,
        ),
        (r"could not resolve host|name or service not known", "host name not found", False),
        (r"timed out", "timed out", False),
        (r"returned error: 5\d\d", "server error", False),
    )
)
DETAIL_CHARS = 200


@dataclass(frozen=True)
class CloneFailure:
    words: str  # "connection refused"
    detail: str  # git's own first `fatal:` line, cut short
    permanent: bool  # no retry can change it


def clone_failure(stderr: str) -> CloneFailure:
    detail = _fatal_line(stderr)
    for pattern, words, permanent in _CAUSES:
        if pattern.search(stderr):
            return CloneFailure(words, detail, permanent)
    return CloneFailure("failed", detail, permanent=False)


def clone_failure_text(repo: str, failure: CloneFailure) -> str:
    """One line: `cloning URL: connection refused (fatal: unable to access ...)`."""
    detail = f" ({failure.detail})" if failure.detail else ""
    return f"cloning {repo}: {failure.words}{detail}"


def _fatal_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = next((line for line in lines if line.lower().startswith("fatal:")), None)
    line = first or (lines[-1] if lines else "")
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 1] + "…"
