"""The agent demo's GitHub: the run ends in a pull request, opened on a fake GitHub.

Two loopback services in the demo's process: the run's origin over smart HTTP at
`http://127.0.0.1:PORT/<run id>/origin.git` (fakes/git_http.py: `git http-backend`, pushes
taken), and the fake GitHub REST API (fakes/github_api), which knows that repository and reads
its branches from the bare repository itself. The demo's worker gets the fake's address and
token as any worker gets GitHub's (`OVERNIGHT_GITHUB_API_URL`, `OVERNIGHT_GITHUB_TOKEN`), for
the demo only; the sandbox reaches the origin through the worker's gateway and never sees the
token. Both fakes are plain standard-library code, installed with overnight (pyproject.toml)
so that `overnight demo --agent ...` runs from a wheel as from the repository.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overnight.core.errors import OvernightError

if TYPE_CHECKING:
    from fakes.github_api import FakeGitHub

# The fake takes this token only; it is the demo worker's, never a sandbox's.
DEMO_TOKEN = "ghp_overnightDemoFakeGitHubToken"


@dataclass
class DemoGitHub:
    github: FakeGitHub
    repo_url: str  # the run's origin, as the spec names it
    full_name: str  # owner/name on the fake GitHub

    def pull_request(self) -> dict[str, Any] | None:
        """The branch's pull request as the fake holds it (the newest), or None."""
        pulls = self.github.pulls(self.full_name)
        return pulls[-1] if pulls else None


@contextmanager
def demo_github(origin: Path, owner: str, ui_base: str | None = None) -> Iterator[DemoGitHub]:
    """The fake GitHub and the origin served as `owner`'s repository, while the block runs;
    the demo's worker (in this process) is pointed at the fake meanwhile, and at the dev
    server's Web UI (`ui_base`) for the pull request's link to the run."""
    try:
        from activities.github import API_URL_ENV, TOKEN_ENV
        from fakes.git_http import git_url
        from fakes.github_api import FakeGitHub
        from overnight.core.connect import UI_URL_ENV
    except ImportError as error:  # an install without them: say which, not a traceback
        raise OvernightError(
            f"the agent demo's fake GitHub is missing ({error.name}): reinstall overnight"
        ) from None
    repo_url = git_url(origin, owner=owner)
    name = origin.name.removesuffix(".git")
    with FakeGitHub(token=DEMO_TOKEN) as github:
        github.add_repo(f"{owner}/{name}", origin=origin)
        settings = {TOKEN_ENV: DEMO_TOKEN, API_URL_ENV: github.api_url}
        if ui_base:
            settings[UI_URL_ENV] = ui_base
        with _environment(settings):
            yield DemoGitHub(github=github, repo_url=repo_url, full_name=f"{owner}/{name}")


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """`values` in this process's environment, and what was there before back afterwards."""
    earlier = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in earlier.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def pull_request_fields() -> dict[str, Any]:
    """The spec's `pull_request`: a draft into main, titled by the agent's summary. No labels:
    adding them is a second write, which the worker spaces a second from the first, as GitHub
    asks (activities/github/client.py), and the demo has no second to spare."""
    return {"base": "main", "draft": True}


def save_pull_request(pull: dict[str, Any], folder: Path) -> Path:
    """The pull request's title, labels and body as a Markdown file beside the demo's origin:
    the fake GitHub ends with the demo, what the reviewer would have read stays."""
    path = folder / "pull-request.md"
    labels = ", ".join(str(label.get("name")) for label in pull.get("labels") or [])
    head, base = pull.get("head") or {}, pull.get("base") or {}
    path.write_text(
        f"# {pull.get('title')}\n\n"
        f"{pull.get('html_url')} ({'draft, ' if pull.get('draft') else ''}"
        f"{head.get('ref')} into {base.get('ref')}, head {str(head.get('sha'))[:12]}; "
        f"labels: {labels or '-'})\n\n{pull.get('body') or ''}\n",
        encoding="utf-8",
    )
    return path


def pull_request_line(url: str | None, record: Path | None) -> str:
    """The demo's last line: where its pull request is (or that it has none)."""
    if url is None:
        return "no pull request was opened"
    kept = f": its title and body are in {record}" if record is not None else ""
    return f"pull request: {url} (on the demo's fake GitHub, which ends with the demo{kept})"
