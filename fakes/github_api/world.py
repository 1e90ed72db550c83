"""What the fake GitHub holds: repositories, their branches, pull requests, labels, files, and
the check runs and commit statuses reported per commit. Plain data behind one lock.

A repository's branches are read from a real bare git repository when it has one (`origin`:
the one `fakes/git_http.py` serves to a run), so a pull request's head is the commit the run
pushed, a missing branch is missing and "no commits between" is git's own answer; without an
origin, a test sets branches by hand (`set_branch`).
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The states GitHub gives a check run, and the conclusions of a completed one.
CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CHECK_CONCLUSIONS = (
    "success",
    "failure",
    "neutral",
    "cancelled",
    "skipped",
    "timed_out",
    "action_required",
    "stale",
    "startup_failure",
)
STATUS_STATES = ("error", "failure", "pending", "success")


@dataclass
class CheckRun:
    """One check run as the API lists it (`output` holds `title`, `summary`, `text`)."""

    name: str
    status: str = "completed"
    conclusion: str | None = "success"
    title: str = ""
    summary: str = ""
    text: str = ""
    details_url: str = ""

    def __post_init__(self) -> None:
        assert self.status in CHECK_STATUSES, self.status
        assert self.conclusion is None or self.conclusion in CHECK_CONCLUSIONS, self.conclusion
        if self.status != "completed":
            self.conclusion = None


@dataclass
class CommitStatus:
    """One commit status (`POST /statuses/{sha}`): its context, state and description."""

    context: str
    state: str = "success"
    description: str = ""
    target_url: str = ""

    def __post_init__(self) -> None:
        assert self.state in STATUS_STATES, self.state


@dataclass
class Repo:
    owner: str
    name: str
    default_branch: str
    origin: Path | None
    branches: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)
    # sha -> what was reported on it (newest last).
    check_runs: dict[str, list[CheckRun]] = field(default_factory=dict)
    statuses: dict[str, list[CommitStatus]] = field(default_factory=dict)
    # A CI of the repository (`FakeGitHub.run_ci`): the check runs it reports on a commit,
    # asked once per commit; the first look finds them in progress, the later ones done.
    ci: Callable[[str], list[CheckRun]] | None = None
    ci_asked: dict[str, int] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class World:
    """Every repository of the fake, by `owner/name` (GitHub's names are case-insensitive)."""

    def __init__(self, web_url: str) -> None:
        self.web_url = web_url
        self.lock = threading.RLock()
        self.repos: dict[str, Repo] = {}
        self._next_id = 1000

    def add(self, full_name: str, origin: Path | None, default_branch: str) -> Repo:
        owner, _, name = full_name.partition("/")
        assert owner and name and "/" not in name, full_name
        with self.lock:
            repo = Repo(owner, name, default_branch, origin)
            self.repos[full_name.lower()] = repo
            return repo

    def repo(self, owner: str, name: str) -> Repo | None:
        with self.lock:
            return self.repos.get(f"{owner}/{name}".lower())

    def reported_runs(self, repo: Repo, sha: str) -> list[CheckRun]:
        """The check runs reported on `sha`: those set by a test, else the repository's CI's
        (in progress at its first look, as a CI just queued)."""
        with self.lock:
            if sha in repo.check_runs or repo.ci is None:
                return repo.check_runs.get(sha, [])
            asked = repo.ci_asked.get(sha, 0)
            repo.ci_asked[sha] = asked + 1
            runs = list(repo.ci(sha))
            if asked == 0:
                return [CheckRun(name=run.name, status="in_progress") for run in runs]
            repo.check_runs[sha] = runs
            return runs

    def new_id(self) -> int:
        with self.lock:
            self._next_id += 1
            return self._next_id

    # --- branches and commits ---

    def branch_sha(self, repo: Repo, ref: str) -> str | None:
        """The commit a branch name (or a full sha) stands for; None: no such branch."""
        if repo.origin is None:
            if ref in repo.branches:
                return repo.branches[ref]
            known = {sha for sha in repo.branches.values()}
            return ref if ref in known or _looks_like_sha(ref) else None
        for name in (f"refs/heads/{ref}", ref):
            found = _git(repo.origin, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
            if found:
                return found
        return None

    def commits_between(self, repo: Repo, base_sha: str, head_sha: str) -> int:
        if repo.origin is None:
            return 0 if base_sha == head_sha else 1
        counted = _git(repo.origin, "rev-list", "--count", f"{base_sha}..{head_sha}")
        return int(counted or 0)

    def file(self, repo: Repo, path: str, ref: str | None = None) -> str | None:
        """A file of `ref` (default: the default branch): set by the test, else the origin's."""
        if path in repo.files and ref in (None, repo.default_branch):
            return repo.files[path]
        if repo.origin is None:
            return None
        blob = f"{ref or repo.default_branch}:{path}"
        return _git(repo.origin, "cat-file", "blob", blob, strip=False)  # a folder is no blob

    def listing(
        self, repo: Repo, folder: str, ref: str | None = None
    ) -> list[tuple[str, str]] | None:
        """The (name, "file" | "dir") entries of a folder ("" the root); None: no folder."""
        prefix = f"{folder}/" if folder else ""
        entries: dict[str, str] = {}
        if repo.origin is not None:
            tree = f"{ref or repo.default_branch}:{folder}"
            for line in (_git(repo.origin, "ls-tree", tree) or "").splitlines():
                meta, _, name = line.partition("\t")
                entries[name] = "dir" if meta.split()[1] == "tree" else "file"
        if ref in (None, repo.default_branch):
            for path in repo.files:
                if path.startswith(prefix):
                    name, slash, _ = path[len(prefix) :].partition("/")
                    entries[name] = "dir" if slash else "file"
        if not entries and folder:
            return None
        return sorted(entries.items())

    # --- what the API returns ---

    def pull_json(self, repo: Repo, pull: dict[str, Any]) -> dict[str, Any]:
        head_sha = self.branch_sha(repo, pull["head"]) or pull["head_sha"]
        return {
            "id": pull["id"],
            "node_id": f"PR_{pull['id']}",
            "number": pull["number"],
            "url": f"/repos/{repo.full_name}/pulls/{pull['number']}",
            "html_url": f"{self.web_url}/{repo.full_name}/pull/{pull['number']}",
            "state": pull["state"],
            "title": pull["title"],
            "body": pull["body"],
            "draft": pull["draft"],
            "labels": [repo.labels[name] for name in pull["labels"]],
            "head": _branch_json(repo, pull["head"], head_sha),
            "base": _branch_json(repo, pull["base"], self.branch_sha(repo, pull["base"]) or ""),
            "created_at": pull["created_at"],
            "updated_at": pull["updated_at"],
        }

    def label(self, repo: Repo, name: str) -> dict[str, Any]:
        with self.lock:
            if name not in repo.labels:
                repo.labels[name] = {
                    "id": self.new_id(),
                    "name": name,
                    "color": hashlib.sha1(name.encode()).hexdigest()[:6],
                    "default": False,
                    "description": None,
                }
            return repo.labels[name]


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def contents_json(path: str, text: str) -> dict[str, Any]:
    """A file as `GET /contents/{path}` gives it: base64 in lines of 60, as GitHub does."""
    data = base64.b64encode(text.encode()).decode()
    lines = "\n".join(data[i : i + 60] for i in range(0, len(data), 60))
    blob = hashlib.sha1(b"blob %d\0" % len(text.encode()) + text.encode()).hexdigest()
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(text.encode()),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "sha": blob,
        "content": lines + "\n",
    }


def _branch_json(repo: Repo, ref: str, sha: str) -> dict[str, Any]:
    return {
        "label": f"{repo.owner}:{ref}",
        "ref": ref,
        "sha": sha,
        "repo": {"full_name": repo.full_name, "name": repo.name, "owner": {"login": repo.owner}},
    }


def _looks_like_sha(ref: str) -> bool:
    return len(ref) == 40 and all(c in "0123456789abcdef" for c in ref)


def _git(origin: Path, *args: str, strip: bool = True) -> str | None:
    done = subprocess.run(
        ["git", "--git-dir", str(origin), *args], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        return None
    return done.stdout.strip() if strip else done.stdout
