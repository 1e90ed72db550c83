"""Which GitHub repository an origin is, however it is written, and where its API is:
github.com's `api.github.com`, an Enterprise server's `/api/v3`; credentials never kept."""

from __future__ import annotations

import pytest

from activities.github import GitHubRepo, api_url_for, parse_repo_url

GITHUB = GitHubRepo(host="github.com", owner="octo", name="app")


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/octo/app",
        "https://github.com/octo/app.git",
        "https://github.com/octo/app/",
        "https://GitHub.com/octo/app.git",
        "https://x-access-token:ghs_SECRET@github.com/octo/app.git",
        "git@github.com:octo/app.git",
        "git@github.com:octo/app",
        "ssh://git@github.com/octo/app.git",
        "ssh://git@github.com:22/octo/app.git",
        "  https://github.com/octo/app.git\n",
    ],
)
def test_every_way_of_writing_a_github_com_origin_names_the_same_repository(url: str) -> None:
    found = parse_repo_url(url)
    assert found == GITHUB
    assert found.api_url == "https://api.github.com"
    assert "SECRET" not in repr(found)


@pytest.mark.parametrize(
    ("url", "api_url"),
    [
        ("https://ghe.example.com/octo/app.git", "https://ghe.example.com/api/v3"),
        ("git@ghe.example.com:octo/app.git", "https://ghe.example.com/api/v3"),
        ("ssh://git@ghe.example.com:2222/octo/app", "https://ghe.example.com/api/v3"),
        ("https://ghe.example.com:8443/octo/app", "https://ghe.example.com:8443/api/v3"),
        ("http://127.0.0.1:8080/octo/app.git", "http://127.0.0.1:8080/api/v3"),
    ],
)
def test_any_other_host_is_an_enterprise_server_with_its_api_under_api_v3(
    url: str, api_url: str
) -> None:
    found = parse_repo_url(url)
    assert (found.owner, found.name, found.api_url) == ("octo", "app", api_url)


def test_the_head_filter_names_the_owner_and_the_branch() -> None:
    assert GITHUB.head_label("agent/run-1") == "octo:agent/run-1"
    assert GITHUB.full_name == "octo/app"
    assert api_url_for("www.github.com") == "https://api.github.com"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://github.com/octo", "path should be /OWNER/NAME"),
        ("https://github.com/octo/app/tree/main", "path should be /OWNER/NAME"),
        ("/srv/git/app.git", "no host"),
        ("file:///srv/git/app.git", "scheme 'file'"),
        ("https://github.com/-octo/app", "not a GitHub owner"),
        ("https://github.com/octo/..", "not a GitHub repository name"),
        ("https://github.com/octo/a%20b", "not a GitHub repository name"),
    ],
)
def test_what_names_no_repository_is_refused_saying_why(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace(".", r"\.")):
        parse_repo_url(url)


def test_a_refusal_never_repeats_the_credentials() -> None:
    with pytest.raises(ValueError) as refused:
        parse_repo_url("https://user:ghp_SECRET@github.com/octo")
    assert "SECRET" not in str(refused.value)
