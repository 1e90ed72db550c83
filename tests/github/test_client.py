"""The GitHub client against the fake GitHub: tried again by GitHub's documented rules (a
secondary limit's `retry-after`, the primary limit's reset, server errors and dropped
connections with a growing wait, within its tries and its wait cap), never tried again for a
refusal, a `304` for an unchanged poll that costs no request of the limit, Enterprise's
`/api/v3`, and a token that never shows in an error nor follows a redirect."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from activities.github import (
    API_URL_ENV,
    TOKEN_ENV,
    GitHubClient,
    GitHubError,
    GitHubRepo,
    client_for,
)
from fakes.github_api import FakeGitHub
from tests.github.conftest import QUICK, TOKEN

PULLS = "/repos/octo/app/pulls"


def test_a_secondary_rate_limit_is_waited_out_for_its_retry_after(
    github: FakeGitHub, client: GitHubClient
) -> None:
    github.fail("secondary", route="list_pulls", retry_after=1)
    began = time.monotonic()
    answer = client.get(PULLS)
    assert answer.status == 200 and answer.data == []
    assert time.monotonic() - began >= 1.0  # it waited what GitHub asked (at least)
    assert github.count("list_pulls", status=403) == 1 and github.count("list_pulls") == 2


def test_a_secondary_rate_limit_as_429_without_a_time_is_waited_out_too(
    github: FakeGitHub, client: GitHubClient
) -> None:
    github.fail("secondary", route="list_pulls", status=429, times=2)
    assert client.get(PULLS).status == 200
    assert github.count("list_pulls", status=429) == 2


def test_the_primary_rate_limit_is_waited_out_until_its_reset(
    github: FakeGitHub, client: GitHubClient
) -> None:
    github.exhaust_rate_limit(reset_in_seconds=1)
    began = time.time()
    answer = client.get(PULLS)
    assert answer.status == 200
    refused = [r for r in github.requests() if r.status == 403]
    assert len(refused) == 1
    assert time.time() >= began + 1  # not before the reset
    assert int(answer.headers["x-ratelimit-remaining"]) == 4999  # a new window, one used


def test_server_errors_and_dropped_connections_are_tried_again(
    github: FakeGitHub, client: GitHubClient
) -> None:
    github.fail("server", route="list_pulls", times=2)
    github.fail("drop", route="list_pulls")
    assert client.get(PULLS).status == 200
    assert github.count("list_pulls") == 4


def test_a_refusal_is_not_tried_again(github: FakeGitHub, client: GitHubClient) -> None:
    github.fail("forbidden", route="list_pulls")
    with pytest.raises(GitHubError, match="Resource not accessible") as refused:
        client.get(PULLS)
    assert refused.value.status == 403 and not refused.value.retryable
    assert github.count("list_pulls") == 1


def test_tries_are_bounded_and_the_error_says_it_may_succeed_later(
    github: FakeGitHub, client: GitHubClient
) -> None:
    github.fail("server", route="list_pulls", times=10)
    bounded = GitHubClient(github.api_url, TOKEN, rules=replace(QUICK, max_tries=3))
    with pytest.raises(GitHubError, match="gave up after 3 tries") as given_up:
        bounded.get(PULLS)
    assert given_up.value.retryable and given_up.value.status == 502
    assert github.count("list_pulls") == 3


def test_a_wait_past_the_cap_is_left_to_the_caller(github: FakeGitHub) -> None:
    github.fail("secondary", route="list_pulls", retry_after=120)
    capped = GitHubClient(github.api_url, TOKEN, rules=replace(QUICK, max_wait_seconds=5))
    with pytest.raises(GitHubError, match="secondary rate limit") as later:
        capped.get(PULLS)
    assert later.value.retryable and later.value.wait_seconds == 120
    assert github.count("list_pulls") == 1  # it did not wait two minutes to ask again


def test_an_unchanged_poll_is_a_304_that_costs_no_request(
    github: FakeGitHub, client: GitHubClient
) -> None:
    first = client.get("/repos/octo/app/commits/main/status")
    again = client.get("/repos/octo/app/commits/main/status")
    assert not first.from_cache and again.from_cache and again.data == first.data
    assert github.count(status=304) == 1
    assert again.headers["x-ratelimit-remaining"] == first.headers["x-ratelimit-remaining"]
    assert client.get(PULLS).data == []
    github.open_pull("octo/app", "agent/run-1", "main")  # the list changes: a 200 again
    changed = client.get(PULLS)
    assert not changed.from_cache and len(changed.data) == 1
    assert github.count(status=304) == 1


def test_the_worker_s_clients_share_one_etag_cache_so_a_later_poll_costs_nothing(
    github: FakeGitHub, repo: GitHubRepo
) -> None:
    environ = {TOKEN_ENV: TOKEN, API_URL_ENV: github.api_url}
    client_for(repo, environ, rules=QUICK).get(PULLS)
    again = client_for(repo, environ, rules=QUICK).get(PULLS)  # another activity, later
    assert again.from_cache and github.count("list_pulls", status=304) == 1
    with pytest.raises(GitHubError, match=f"{TOKEN_ENV} is not set"):
        client_for(repo, {API_URL_ENV: github.api_url})


def test_enterprise_serves_the_api_under_api_v3(origin: Any) -> None:
    with FakeGitHub(token=TOKEN, enterprise=True) as enterprise:
        enterprise.add_repo("octo/app", origin=origin)
        assert enterprise.api_url.endswith("/api/v3")
        assert GitHubClient(enterprise.api_url, TOKEN, rules=QUICK).get(PULLS).status == 200
        with pytest.raises(GitHubError) as not_there:
            GitHubClient(enterprise.url, TOKEN, rules=QUICK).get(PULLS)
        assert not_there.value.status == 404


def test_a_wrong_token_is_refused_and_never_shown(github: FakeGitHub) -> None:
    wrong = "ghp_wrongWRONGwrong0123456789"
    client = GitHubClient(github.api_url, wrong, rules=QUICK)
    with pytest.raises(GitHubError) as refused:
        client.get(PULLS)
    assert refused.value.status == 401 and "Bad credentials" in str(refused.value)
    assert wrong not in str(refused.value) and wrong not in repr(refused.value)
    assert wrong not in repr(client)


def test_a_server_that_echoes_the_token_has_it_redacted(echo_server: str) -> None:
    client = GitHubClient(echo_server, TOKEN, rules=QUICK)
    with pytest.raises(GitHubError) as refused:
        client.get(PULLS)
    assert "you sent" in str(refused.value) and TOKEN not in str(refused.value)


def test_no_answer_at_all_says_so_without_the_token() -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = GitHubClient(f"http://127.0.0.1:{port}", TOKEN, rules=replace(QUICK, max_tries=2))
    with pytest.raises(GitHubError, match="no answer") as nobody:
        client.get(PULLS)
    assert nobody.value.retryable and nobody.value.status == 0
    assert TOKEN not in str(nobody.value)


def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else(
    redirecting_server: tuple[str, list[str]],
) -> None:
    url, elsewhere_saw = redirecting_server
    with pytest.raises(GitHubError, match="HTTP 302"):
        GitHubClient(url, TOKEN, rules=QUICK).get(PULLS)
    assert elsewhere_saw == []


# --- two servers of the tests' own: a hostile echo and a redirect ---


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        said = json.dumps({"message": f"you sent {self.headers.get('Authorization')}"}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(said)))
        self.end_headers()
        self.wfile.write(said)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    serve.daemon = True
    serve.start()
    return server


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = _serve(_Echo)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def redirecting_server() -> Iterator[tuple[str, list[str]]]:
    saw: list[str] = []

    class Elsewhere(_Echo):
        def do_GET(self) -> None:  # noqa: N802
            saw.append(str(self.headers.get("Authorization")))
            super().do_GET()

    elsewhere = _serve(Elsewhere)
    target = f"http://127.0.0.1:{elsewhere.server_address[1]}/stolen"

    class Redirect(_Echo):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(302)
            self.send_header("location", target)
            self.send_header("content-length", "0")
            self.end_headers()

    redirect = _serve(Redirect)
    yield f"http://127.0.0.1:{redirect.server_address[1]}", saw
    for server in (redirect, elsewhere):
        server.shutdown()
        server.server_close()
