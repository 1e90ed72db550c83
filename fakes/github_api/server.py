"""`FakeGitHub`: the fake GitHub REST API on a loopback port, one thread per connection.

    with FakeGitHub(token="t") as github:
        github.add_repo("octo/app", origin=bare_repo)       # branches read from a real repo
        github.fail("secondary", route="create_pull", retry_after=1)
        ...  # a client at github.api_url, `Authorization: Bearer t`
        assert len(github.pulls("octo/app")) == 1 and github.count("create_pull") == 2

Every request must carry the token (`Bearer` or `token`; else 401). `enterprise=True` serves
the API under `/api/v3`, as GitHub Enterprise Server does (`api_url` says where). Every
answer carries the `x-ratelimit-*` headers; a `GET` answered 200 carries an `ETag`, and the
same `GET` with `If-None-Match: <it>` is answered `304 Not Modified`, which costs no request
of the limit (fakes/github_api/limits.py holds the limits and scripted failures).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fakes.github_api.limits import PRIMARY_MESSAGE, Fault, FaultKind, RateBook, fault_answer
from fakes.github_api.routes import Answer, Request, create_pull, not_found, route_of
from fakes.github_api.wire import handler_for
from fakes.github_api.world import CheckRun, CommitStatus, World

ENTERPRISE_PREFIX = "/api/v3"


@dataclass(frozen=True)
class Recorded:
    """One request the fake received and how it answered (`route`: "" when unrouted)."""

    route: str
    method: str
    path: str
    status: int
    conditional: bool  # carried If-None-Match


class FakeGitHub:
    """Use as a context manager (or `start()` / `close()`); `port=0` picks a free port."""

    def __init__(
        self,
        *,
        token: str = "fake-github-token",
        enterprise: bool = False,
        rate_limit: int = 5000,
        window_seconds: float = 3600,
        port: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.token = token
        self.enterprise = enterprise
        self.book = RateBook(rate_limit, window_seconds, clock)
        self.world = World(web_url="")
        self._port = port
        self._log: list[Recorded] = []
        self._changed = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._before: list[tuple[str, Callable[[], None]]] = []

    # --- lifecycle ---

    def start(self) -> FakeGitHub:
        server = ThreadingHTTPServer(("127.0.0.1", self._port), handler_for(self))
        server.daemon_threads = True
        self._server = server
        self.world.web_url = self.url
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="fake-github"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The web address (pull requests' `html_url` start with it)."""
        assert self._server is not None, "start the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        """The API's base URL: github.com's shape, or Enterprise's `/api/v3`."""
        return self.url + (ENTERPRISE_PREFIX if self.enterprise else "")

    # --- the world, set by a test ---

    def add_repo(
        self,
        full_name: str,
        *,
        origin: Path | None = None,
        default_branch: str = "main",
        branches: dict[str, str] | None = None,
        files: dict[str, str] | None = None,
    ) -> None:
        """A repository; with `origin` (a bare git repo) its branches and files are that
        repo's, else those given here (`branches`: name -> sha) and by `set_branch`."""
        repo = self.world.add(full_name, origin, default_branch)
        repo.branches.update(branches or {})
        repo.files.update(files or {})

    def set_branch(self, full_name: str, branch: str, sha: str) -> None:
        with self.world.lock:
            self._repo(full_name).branches[branch] = sha

    def set_file(self, full_name: str, path: str, text: str | None) -> None:
        with self.world.lock:
            files = self._repo(full_name).files
            if text is None:
                files.pop(path, None)
            else:
                files[path] = text

    def set_check_runs(self, full_name: str, sha: str, runs: Iterable[CheckRun]) -> None:
        """The check runs reported on `sha` (replacing earlier ones)."""
        with self.world.lock:
            self._repo(full_name).check_runs[sha] = list(runs)

    def run_ci(self, full_name: str, judge: Callable[[str], list[CheckRun]]) -> None:
        """A CI of the repository: `judge(sha)` says the check runs it reports on a commit
        (run once per commit; the first look at a commit finds them in progress)."""
        with self.world.lock:
            self._repo(full_name).ci = judge

    def add_statuses(self, full_name: str, sha: str, statuses: Iterable[CommitStatus]) -> None:
        """Commit statuses posted on `sha`, newest last (each context's newest counts)."""
        with self.world.lock:
            self._repo(full_name).statuses.setdefault(sha, []).extend(statuses)

    def fail(
        self,
        kind: FaultKind,
        *,
        route: str | None = None,
        times: int = 1,
        status: int = 0,
        retry_after: int | None = None,
        after: bool = False,
    ) -> None:
        """The next `times` requests to `route` (any, if None) fail as `kind`: "secondary"
        (403, or `status` 429; `retry-after` when given), "server" (502, or `status`), "drop"
        (the connection closed unanswered), "forbidden" (a 403 for a missing permission).
        `after`: the request's work is done first, and then its answer fails."""
        self.book.script(Fault(kind, route, times, status, retry_after, after))

    def before(self, route: str, action: Callable[[], None]) -> None:
        """Run `action` once, just before the next request to `route` is served: another
        client's write landing between this client's read and its write (a race)."""
        with self._changed:
            self._before.append((route, action))

    def open_pull(self, full_name: str, head: str, base: str, title: str = "") -> int:
        """Open a pull request as someone else would (no request counted); its number."""
        repo = self._repo(full_name)
        body = {"title": title or head, "head": head, "base": base}
        answer = create_pull(self.world, repo, Request("POST", "", {}, {}, body), {})
        assert answer.status == 201, answer.body
        return int(answer.body["number"])

    def exhaust_rate_limit(self, reset_in_seconds: float) -> None:
        """The primary rate limit used up, until `reset_in_seconds` from now."""
        self.book.exhaust(reset_in_seconds)

    # --- what happened ---

    def pulls(self, full_name: str, state: str = "all") -> list[dict[str, Any]]:
        """The repository's pull requests as the API shows them, oldest first."""
        with self.world.lock:
            repo = self._repo(full_name)
            chosen = [p for p in repo.pulls if state in ("all", p["state"])]
            return [self.world.pull_json(repo, p) for p in chosen]

    def requests(self) -> list[Recorded]:
        with self._changed:
            return list(self._log)

    def count(self, route: str | None = None, *, status: int | None = None) -> int:
        """Requests received (to `route`, answered `status`, when given)."""
        return sum(
            1 for r in self.requests() if route in (None, r.route) and status in (None, r.status)
        )

    def _repo(self, full_name: str) -> Any:
        owner, _, name = full_name.partition("/")
        repo = self.world.repo(owner, name)
        assert repo is not None, f"no repository {full_name} in the fake"
        return repo

    def _run_before(self, route: str) -> None:
        with self._changed:
            due = [a for r, a in self._before if r == route]
            self._before = [(r, a) for r, a in self._before if r != route or a is not due[0]]
        if due:
            due[0]()

    def _record(self, entry: Recorded) -> None:
        with self._changed:
            self._log.append(entry)
            self._changed.notify_all()

    # --- serving one request ---

    def serve(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Answer | None:
        """The answer to one request, or None to drop the connection."""
        parts = urlsplit(target)
        path = parts.path
        conditional = "if-none-match" in headers
        answer, route = self._answer(method, path, parts.query, headers, raw)
        if answer is None:
            self._record(Recorded(route, method, path, 0, conditional))
            return None
        if not answer.free:
            self.book.charge()
        answer.headers = {**self.book.headers(), **answer.headers}
        answer.headers["x-github-request-id"] = f"FAKE:{next(self._ids)}"
        self._record(Recorded(route, method, path, answer.status, conditional))
        return answer

    def _answer(
        self, method: str, path: str, query: str, headers: dict[str, str], raw: bytes
    ) -> tuple[Answer | None, str]:
        if self.enterprise:
            if not path.startswith(ENTERPRISE_PREFIX + "/"):
                return not_found(), ""
            path = path[len(ENTERPRISE_PREFIX) :]
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("bearer", "token") or not given:
            return Answer(401, {"message": "Requires authentication"}, free=True), ""
        if given.strip() != self.token:
            return Answer(401, {"message": "Bad credentials"}, free=True), ""
        found = route_of(method, path)
        if found is None:
            return not_found(), ""
        route, handler, params = found
        self._run_before(route)
        verdict = self.book.judge(route)
        if verdict.exhausted:
            return Answer(403, {"message": PRIMARY_MESSAGE}, free=True), route
        fault = verdict.fault
        if fault is not None and fault.kind == "drop" and not fault.after:
            return None, route
        if fault is not None and not fault.after:
            status, extra, body = fault_answer(fault)
            return Answer(status, body, extra), route
        repo = self.world.repo(params["owner"], params["name"])
        if repo is None:
            return not_found(), route
        try:
            sent = json.loads(raw) if raw else None
        except ValueError:
            return Answer(400, {"message": "Problems parsing JSON"}), route
        request = Request(method, path, dict(parse_qsl(query)), headers, sent)
        answer = handler(self.world, repo, request, params)
        if fault is not None:  # the work is done; its answer is lost
            if fault.kind == "drop":
                return None, route
            status, extra, failed = fault_answer(fault)
            return Answer(status, failed, extra), route
        if method == "GET" and answer.status == 200:
            tag = _etag(answer, headers.get("accept", ""))
            if tag in _tags(headers.get("if-none-match", "")):
                return Answer(304, None, {"etag": tag}, free=True), route
            answer.headers["etag"] = tag
        return answer, route


def _etag(answer: Answer, accept: str) -> str:
    data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
    return 'W/"' + hashlib.sha256(accept.encode() + b"\0" + data).hexdigest()[:40] + '"'


def _tags(header: str) -> set[str]:
    return {t.strip() for t in header.split(",") if t.strip()}
