"""The routes of the fake GitHub REST API a run uses, each a function of the world and the
request, answering as GitHub documents it:

- `GET /repos/{o}/{r}/pulls?head=o:branch&base=&state=open` lists pull requests;
- `POST /repos/{o}/{r}/pulls` creates one: `422 Validation Failed` when its head or base is no
  branch, when the head has no commits the base lacks ("No commits between main and x"), or
  when an open pull request from that head into that base exists ("A pull request already
  exists for o:branch.");
- `GET`/`PATCH /repos/{o}/{r}/pulls/{n}` reads one / changes its title, body, base or state;
- `POST /repos/{o}/{r}/issues/{n}/labels` adds labels (made when new), answering all of them;
- `GET /repos/{o}/{r}/commits/{ref}/check-runs` and `.../status` (the combined state: failure
  when any context's latest is `error` or `failure`, pending when there is none or any is
  `pending`, else success);
- `GET /repos/{o}/{r}/contents/{path}` a file in base64 JSON, or raw with
  `Accept: application/vnd.github.raw+json`; a folder's entries (the root's at `/contents`);
  404 when absent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from fakes.github_api.world import Repo, World, contents_json, now_text

RAW_MEDIA_TYPES = ("application/vnd.github.raw", "application/vnd.github.v3.raw")


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the Enterprise prefix
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any


@dataclass
class Answer:
    status: int
    body: Any = None  # JSON, or bytes sent as they are
    headers: dict[str, str] = field(default_factory=dict)
    # Costs no request of the rate limit (a 304, a refusal before any work).
    free: bool = False


Handler = Callable[[World, Repo, Request, dict[str, str]], Answer]
_REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"


def not_found() -> Answer:
    return Answer(
        404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
    )


def invalid(message: str = "", **error: str) -> Answer:
    errors = [{"resource": "PullRequest", "code": "custom", "message": message}] if message else []
    if error:
        errors.append({"resource": "PullRequest", **error})
    return Answer(422, {"message": "Validation Failed", "errors": errors})


def list_pulls(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    state = request.query.get("state", "open")
    head, base = request.query.get("head"), request.query.get("base")
    per_page = min(100, int(request.query.get("per_page", "30")))
    page = max(1, int(request.query.get("page", "1")))
    with world.lock:
        chosen = [
            p
            for p in sorted(repo.pulls, key=lambda p: -int(p["number"]))
            if state in ("all", p["state"])
            and (head is None or head == f"{repo.owner}:{p['head']}")
            and (base is None or base == p["base"])
        ]
        shown = chosen[(page - 1) * per_page : page * per_page]
        return Answer(200, [world.pull_json(repo, p) for p in shown])


def create_pull(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    body = request.body if isinstance(request.body, dict) else {}
    missing = [key for key in ("head", "base") if not isinstance(body.get(key), str)]
    if not isinstance(body.get("title"), str) and "issue" not in body:
        missing.append("title")
    if missing:
        return Answer(422, {"message": "Validation Failed", "errors": [
            {"resource": "PullRequest", "field": key, "code": "missing_field"} for key in missing
        ]})  # fmt: skip
    head_owner, _, head = str(body["head"]).rpartition(":")
    base = str(body["base"])
    if head_owner and head_owner.lower() != repo.owner.lower():
        return invalid(field="head", code="invalid")  # forks are not modelled
    with world.lock:
        head_sha = world.branch_sha(repo, head)
        base_sha = world.branch_sha(repo, base)
        if head_sha is None:
            return invalid(field="head", code="invalid")
        if base_sha is None:
            return invalid(field="base", code="invalid")
        for pull in repo.pulls:
            if pull["state"] == "open" and pull["head"] == head and pull["base"] == base:
                return invalid(f"A pull request already exists for {repo.owner}:{head}.")
        if world.commits_between(repo, base_sha, head_sha) == 0:
            return invalid(f"No commits between {base} and {head}")
        pull = {
            "id": world.new_id(),
            "number": _next_number(repo),
            "state": "open",
            "title": str(body.get("title", "")),
            "body": body.get("body"),
            "draft": bool(body.get("draft", False)),
            "head": head,
            "head_sha": head_sha,
            "base": base,
            "labels": [],
            "created_at": now_text(),
            "updated_at": now_text(),
        }
        repo.pulls.append(pull)
        answer = world.pull_json(repo, pull)
    return Answer(201, answer, {"location": answer["url"]})


def get_pull(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    with world.lock:
        pull = _pull(repo, int(found["number"]))
        return not_found() if pull is None else Answer(200, world.pull_json(repo, pull))


def update_pull(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    body = request.body if isinstance(request.body, dict) else {}
    with world.lock:
        pull = _pull(repo, int(found["number"]))
        if pull is None:
            return not_found()
        if "state" in body and body["state"] not in ("open", "closed"):
            return Answer(422, {"message": "Validation Failed", "errors": [
                {"resource": "PullRequest", "field": "state", "code": "invalid"}
            ]})  # fmt: skip
        if "base" in body and world.branch_sha(repo, str(body["base"])) is None:
            return invalid(field="base", code="invalid")
        for key in ("title", "body", "state", "base"):
            if key in body:
                pull[key] = body[key]
        pull["updated_at"] = now_text()
        return Answer(200, world.pull_json(repo, pull))


def add_labels(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    body = request.body
    names = body.get("labels") if isinstance(body, dict) else body
    if not isinstance(names, list) or not names:
        return Answer(422, {"message": "Invalid request.\n\nNo labels were given."})
    wanted = [n["name"] if isinstance(n, dict) else n for n in names]
    if not all(isinstance(n, str) and n for n in wanted):
        return Answer(422, {"message": "Invalid request."})
    with world.lock:
        pull = _pull(repo, int(found["number"]))
        if pull is None:
            return not_found()
        for name in wanted:
            world.label(repo, name)
            if name not in pull["labels"]:
                pull["labels"].append(name)
        return Answer(200, [repo.labels[name] for name in pull["labels"]])


def check_runs(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    with world.lock:
        sha = world.branch_sha(repo, found["ref"])
        if sha is None:
            return Answer(422, {"message": f"No commit found for SHA: {found['ref']}"})
        runs = [
            {
                "id": index + 1,
                "name": run.name,
                "head_sha": sha,
                "status": run.status,
                "conclusion": run.conclusion,
                "details_url": run.details_url,
                "html_url": run.details_url,
                "output": {"title": run.title, "summary": run.summary, "text": run.text},
            }
            for index, run in enumerate(world.reported_runs(repo, sha))
        ]
        return Answer(200, {"total_count": len(runs), "check_runs": runs})


def combined_status(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    with world.lock:
        sha = world.branch_sha(repo, found["ref"])
        if sha is None:
            return Answer(422, {"message": f"No commit found for SHA: {found['ref']}"})
        latest: dict[str, Any] = {}
        for status in repo.statuses.get(sha, []):  # the newest of each context wins
            latest[status.context] = status
        states = {s.state for s in latest.values()}
        if states & {"error", "failure"}:
            state = "failure"
        elif not states or "pending" in states:
            state = "pending"
        else:
            state = "success"
        statuses = [
            {
                "context": s.context,
                "state": s.state,
                "description": s.description,
                "target_url": s.target_url,
            }
            for s in latest.values()
        ]
        return Answer(
            200, {"state": state, "sha": sha, "total_count": len(statuses), "statuses": statuses}
        )


def contents(world: World, repo: Repo, request: Request, found: dict[str, str]) -> Answer:
    path, ref = found["path"].strip("/"), request.query.get("ref")
    with world.lock:
        text = world.file(repo, path, ref) if path else None
        listing = world.listing(repo, path, ref) if text is None else None
    if text is None and listing is None:
        return not_found()
    if listing is not None:  # a folder: its entries
        return Answer(200, [
            {"type": kind, "name": name, "path": f"{path}/{name}".lstrip("/")}
            for name, kind in listing
        ])  # fmt: skip
    assert text is not None
    if request.headers.get("accept", "").startswith(RAW_MEDIA_TYPES):
        return Answer(200, text.encode(), {"content-type": "application/vnd.github.raw"})
    return Answer(200, contents_json(path, text))


# Name -> (method, path pattern, handler); the names are what the fake counts and faults by.
ROUTES: dict[str, tuple[str, re.Pattern[str], Handler]] = {
    "list_pulls": ("GET", re.compile(_REPO + r"/pulls/?"), list_pulls),
    "create_pull": ("POST", re.compile(_REPO + r"/pulls/?"), create_pull),
    "get_pull": ("GET", re.compile(_REPO + r"/pulls/(?P<number>\d+)"), get_pull),
    "update_pull": ("PATCH", re.compile(_REPO + r"/pulls/(?P<number>\d+)"), update_pull),
    "add_labels": ("POST", re.compile(_REPO + r"/issues/(?P<number>\d+)/labels"), add_labels),
    "check_runs": ("GET", re.compile(_REPO + r"/commits/(?P<ref>[^/]+)/check-runs"), check_runs),
    "combined_status": (
        "GET",
        re.compile(_REPO + r"/commits/(?P<ref>[^/]+)/status"),
        combined_status,
    ),
    "contents": ("GET", re.compile(_REPO + r"/contents(?:/(?P<path>.*))?"), contents),
}


def route_of(method: str, path: str) -> tuple[str, Handler, dict[str, str]] | None:
    """The route of a request's (percent-encoded) path, and its parts decoded: a branch
    named `agent/x` is sent as `agent%2Fx`."""
    for name, (verb, pattern, handler) in ROUTES.items():
        found = pattern.fullmatch(path)
        if found is not None and verb == method:
            return name, handler, {k: unquote(v or "") for k, v in found.groupdict().items()}
    return None


def _pull(repo: Repo, number: int) -> dict[str, Any] | None:
    return next((p for p in repo.pulls if p["number"] == number), None)


def _next_number(repo: Repo) -> int:
    # Pull requests and issues share one sequence on GitHub; the fake has no issues.
    return 1 + max((int(p["number"]) for p in repo.pulls), default=0)
