"""A repository's pull request template, read where GitHub looks for one.

GitHub takes a template from the default branch, in `.github/`, the root or `docs/`, named
`pull_request_template` in any case, with an extension such as `.md` or `.txt` (a folder
`PULL_REQUEST_TEMPLATE/` of several templates is chosen from by a URL parameter in the
browser, so it is not a default and is not read here). The contents API is case-sensitive,
so the three folders are listed (three requests, each with its ETag) and the file is read
from the one that has it.
"""

from __future__ import annotations

import re

from activities.github.client import RAW_MEDIA_TYPE, GitHubClient, GitHubError, path_part
from activities.github.repo_url import GitHubRepo

# Where GitHub looks, first to last.
TEMPLATE_FOLDERS = (".github", "", "docs")
_TEMPLATE_NAME = re.compile(r"pull_request_template(\.(md|markdown|txt))?", re.IGNORECASE)
# A template bigger than this is no template (GitHub's body limit is 65,536 characters).
MAX_TEMPLATE_CHARS = 20_000


def read_pull_request_template(client: GitHubClient, repo: GitHubRepo) -> str | None:
    """The template's text; None when the repository has none (or it is empty)."""
    contents = f"/repos/{path_part(repo.owner)}/{path_part(repo.name)}/contents"
    for folder in TEMPLATE_FOLDERS:
        try:
            listed = client.get(f"{contents}/{folder}" if folder else contents)
        except GitHubError as error:
            if error.status == 404:
                continue
            raise
        entries = listed.data if isinstance(listed.data, list) else []
        names = sorted(
            str(e.get("name"))
            for e in entries
            if isinstance(e, dict)
            and e.get("type") == "file"
            and _TEMPLATE_NAME.fullmatch(str(e.get("name")))
        )
        if names:
            path = "/".join(path_part(p) for p in (folder, names[0]) if p)
            text = client.get(f"{contents}/{path}", accept=RAW_MEDIA_TYPE).data
            text = text if isinstance(text, str) else ""
            return text[:MAX_TEMPLATE_CHARS] if text.strip() else None
    return None
