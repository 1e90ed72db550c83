"""The fake GitHub held to GitHub's documented answers, seen on the wire: the token check,
the `422` of a second pull request and its shape, a base64 file, the rate-limit headers on
every answer, `304`s that cost nothing, the primary and the secondary limits."""

from __future__ import annotations

import base64
import http.client
import json
import time
from typing import Any

from fakes.github_api import FakeGitHub
from tests.github.conftest import BRANCH, TOKEN


def call(
    github: FakeGitHub, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, dict[str, str], Any]:
    connection = http.client.HTTPConnection("127.0.0.1", int(github.url.rsplit(":", 1)[1]))
    sent = {"Authorization": f"Bearer {TOKEN}", **headers}
    data = json.dumps(body).encode() if body is not None else None
    connection.request(method, path, body=data, headers=sent)
    answer = connection.getresponse()
    raw = answer.read()
    connection.close()
    got = {name.lower(): value for name, value in answer.getheaders()}
    return answer.status, got, json.loads(raw) if raw else None


def test_no_token_or_a_wrong_one_is_401(github: FakeGitHub) -> None:
    assert call(github, "GET", "/repos/octo/app/pulls", Authorization="")[0] == 401
    status, _, said = call(github, "GET", "/repos/octo/app/pulls", Authorization="token nope")
    assert (status, said["message"]) == (401, "Bad credentials")
    assert call(github, "GET", "/repos/octo/app/pulls", Authorization=f"token {TOKEN}")[0] == 200


def test_a_second_pull_request_for_a_head_is_refused_as_github_does(github: FakeGitHub) -> None:
    wanted = {"title": "t", "head": BRANCH, "base": "main"}
    assert call(github, "POST", "/repos/octo/app/pulls", wanted)[0] == 201
    status, _, said = call(
        github, "POST", "/repos/octo/app/pulls", {**wanted, "head": f"octo:{BRANCH}"}
    )
    assert status == 422 and said["message"] == "Validation Failed"
    assert said["errors"] == [
        {
            "resource": "PullRequest",
            "code": "custom",
            "message": f"A pull request already exists for octo:{BRANCH}.",
        }
    ]
    status, _, found = call(github, "GET", f"/repos/octo/app/pulls?head=octo:{BRANCH}&state=open")
    assert [p["number"] for p in found] == [1]
    assert call(github, "GET", "/repos/octo/app/pulls?head=other:x")[2] == []


def test_a_file_comes_in_base64_and_raw(github: FakeGitHub) -> None:
    github.set_file("octo/app", "docs/a.md", "héllo\n")
    status, _, said = call(github, "GET", "/repos/octo/app/contents/docs/a.md")
    assert status == 200 and said["encoding"] == "base64"
    assert base64.b64decode(said["content"]).decode() == "héllo\n"
    assert call(github, "GET", "/repos/octo/app/contents/nope.md")[0] == 404


def test_every_answer_carries_the_rate_limit_and_a_304_costs_none(github: FakeGitHub) -> None:
    _, first, _ = call(github, "GET", "/repos/octo/app/commits/main/status")
    assert first["x-ratelimit-limit"] == "5000" and first["x-ratelimit-remaining"] == "4999"
    assert int(first["x-ratelimit-reset"]) > time.time()
    status, again, _ = call(
        github, "GET", "/repos/octo/app/commits/main/status", **{"If-None-Match": first["etag"]}
    )
    assert status == 304 and again["x-ratelimit-remaining"] == "4999"
    assert call(github, "GET", "/repos/octo/app/nowhere")[1]["x-ratelimit-remaining"] == "4998"


def test_the_primary_limit_used_up_is_403_with_none_left_and_its_reset(
    github: FakeGitHub,
) -> None:
    github.exhaust_rate_limit(reset_in_seconds=600)
    status, headers, said = call(github, "GET", "/repos/octo/app/pulls")
    assert status == 403 and headers["x-ratelimit-remaining"] == "0"
    assert int(headers["x-ratelimit-reset"]) >= time.time() + 590
    assert "rate limit exceeded" in said["message"]


def test_a_secondary_limit_says_so_with_its_retry_after(github: FakeGitHub) -> None:
    github.fail("secondary", route="create_pull", retry_after=30)
    status, headers, said = call(github, "POST", "/repos/octo/app/pulls", {})
    assert (status, headers["retry-after"]) == (403, "30")
    assert "secondary rate limit" in said["message"] and headers["x-ratelimit-remaining"] != "0"
    assert github.pulls("octo/app") == []
