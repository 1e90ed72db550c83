"""The one pull request of a run's branch: found first, opened if none, brought up to date.

GitHub has no idempotency key for creating a pull request, so the key is the branch itself:
at most one open pull request from a head into a base (GitHub refuses a second with `422`
"A pull request already exists for owner:branch."). `ensure_pull_request` looks for it
first (`GET /pulls?head=owner:branch&base=…&state=open`), opens one only when there is none,
and takes a `422` "already exists" (a create that raced another, or whose `201` was lost and
was sent again) as found: it looks again and goes on with that one. A retried or replayed
step therefore never opens two. It then sets the title and body when they differ and adds
the labels it lacks (never removing a label a person added).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from activities.github.client import GitHubClient, GitHubError, path_part
from activities.github.repo_url import GitHubRepo

# A pull request just made may be missing from the list for a moment (GitHub's search of
# pull requests lags its writes): the lookup after a `422` is tried this many times.
LOOKUP_TRIES = 4
LOOKUP_FIRST_WAIT_SECONDS = 1.0


class NothingToPropose(GitHubError):
    """The head has no commit the base lacks: GitHub opens no pull request for it."""


class BranchMissing(GitHubError):
    """The head (or the base) is no branch of the repository: the run's push is not there."""


@dataclass(frozen=True)
class PullRequest:
    number: int
    html_url: str
    head_sha: str
    draft: bool
    created: bool  # this call opened it
    changed: tuple[str, ...] = ()  # what this call changed of one found: title, body, labels


def find_open_pull_request(
    client: GitHubClient, repo: GitHubRepo, head: str, base: str
) -> dict[str, Any] | None:
    """The open pull request from `head` (a branch of `repo`) into `base`; the oldest if
    several (GitHub allows one per pair, but a person may have opened another meanwhile)."""
    answer = client.get(
        f"/repos/{path_part(repo.owner)}/{path_part(repo.name)}/pulls",
        {"head": repo.head_label(head), "base": base, "state": "open", "per_page": "10"},
    )
    found = [p for p in answer.data if isinstance(p, dict)] if isinstance(answer.data, list) else []
    found = [p for p in found if p.get("head", {}).get("ref") == head and p.get("state") == "open"]
    return min(found, key=lambda p: int(p["number"])) if found else None


def ensure_pull_request(
    client: GitHubClient,
    repo: GitHubRepo,
    *,
    head: str,
    base: str,
    title: str,
    body: str,
    draft: bool = True,
    labels: Sequence[str] = (),
) -> PullRequest:
    """The one open pull request from `head` into `base`, opened or brought up to date.
    `NothingToPropose` / `BranchMissing` when GitHub refuses to open one for those reasons;
    `GitHubError` for the rest (`retryable` when a later try may do)."""
    found = find_open_pull_request(client, repo, head, base)
    created = False
    if found is None:
        found, created = _create(client, repo, head, base, title, body, draft)
    changed: list[str] = []
    if not created:
        changed += _update(client, repo, found, title, body)
    if _add_labels(client, repo, found, labels):
        changed.append("labels")
    return PullRequest(
        number=int(found["number"]),
        html_url=str(found["html_url"]),
        head_sha=str(found.get("head", {}).get("sha", "")),
        draft=bool(found.get("draft", False)),
        created=created,
        changed=tuple(changed),
    )


def _create(
    client: GitHubClient, repo: GitHubRepo, head: str, base: str, title: str, body: str, draft: bool
) -> tuple[dict[str, Any], bool]:
    path = f"/repos/{path_part(repo.owner)}/{path_part(repo.name)}/pulls"
    wanted = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
    try:
        return dict(client.post(path, wanted).data), True
    except GitHubError as error:
        if error.status != 422:
            raise
        said = " ".join(error.details).lower()
        if "already exists" in said:
            return _find_after_race(client, repo, head, base), False
        if "no commits between" in said:
            raise NothingToPropose(str(error), status=422, details=error.details) from None
        if "draft" in said and draft:
            # A repository whose plan has no draft pull requests: a ready one instead.
            return _create(client, repo, head, base, title, body, draft=False)
        if any(d.startswith(("head ", "base ")) for d in error.details):
            raise BranchMissing(str(error), status=422, details=error.details) from None
        raise


def _find_after_race(
    client: GitHubClient, repo: GitHubRepo, head: str, base: str
) -> dict[str, Any]:
    wait = LOOKUP_FIRST_WAIT_SECONDS
    for attempt in range(LOOKUP_TRIES):
        found = find_open_pull_request(client, repo, head, base)
        if found is not None:
            return found
        if attempt + 1 < LOOKUP_TRIES:
            client.sleep(wait)
            wait *= 2
    raise GitHubError(
        f"GitHub says a pull request from {repo.head_label(head)} into {base} exists, "
        "but does not list it yet",
        status=422,
        retryable=True,
    )


def _update(
    client: GitHubClient, repo: GitHubRepo, pull: dict[str, Any], title: str, body: str
) -> list[str]:
    changes: dict[str, str] = {}
    if pull.get("title") != title:
        changes["title"] = title
    if _lines(pull.get("body")) != _lines(body):
        changes["body"] = body
    if changes:
        path = f"/repos/{path_part(repo.owner)}/{path_part(repo.name)}/pulls/{pull['number']}"
        pull.update(client.patch(path, changes).data)
    return list(changes)


def _add_labels(
    client: GitHubClient, repo: GitHubRepo, pull: dict[str, Any], labels: Sequence[str]
) -> bool:
    has = {str(label.get("name")) for label in pull.get("labels") or [] if isinstance(label, dict)}
    missing = [name for name in dict.fromkeys(labels) if name not in has]
    if not missing:
        return False
    path = f"/repos/{path_part(repo.owner)}/{path_part(repo.name)}/issues/{pull['number']}/labels"
    pull["labels"] = client.post(path, {"labels": missing}).data
    return True


def _lines(text: Any) -> str:
    # GitHub may keep a body's line ends as `\r\n` (a body edited in the browser).
    return str(text or "").replace("\r\n", "\n").strip()
