"""A failed clone in a few words, and what no retry fixes told apart from what one may
(activities/sandbox_base/git_words.py)."""

from __future__ import annotations

import pytest

from activities.sandbox_base.git_words import clone_failure, clone_failure_text

URL = "http://127.0.0.1:9/x.git"


@pytest.mark.parametrize(
    ("stderr", "words", "permanent"),
    [
        (f"fatal: repository '{URL}/' not found\n", "repository not found", True),
        (
            f"fatal: unable to access '{URL}/': The requested URL returned error: 403\n",
            "access refused (authentication)",
            True,
        ),
        (
            f"fatal: could not read Username for '{URL}': terminal prompts disabled\n",
            "access refused (authentication)",
            True,
        ),
        ("fatal: repository '/tmp/nope' does not exist\n", "not a git repository", True),
        (
            # What git 2.39 prints cloning a local repository that another user is pushing to
            # (its quarantine folder is theirs alone): seen in the crash bench.
            "warning: error opening directory '/srv/o.git/objects/tmp_objdir-incoming-abc/': "
            "Permission denied\nfatal: failed to iterate over '/srv/o.git/objects/'\n",
            "could not read the repository's objects (a push under way?)",
            False,
        ),
        (
            "fatal: '/tmp/nope' does not appear to be a git repository\n"
            "fatal: Could not read from remote repository.\n",
            "not a git repository",
            True,
        ),
        (
            f"fatal: unable to access '{URL}/': Failed to connect to 127.0.0.1 port 9 after 0 ms:"
            " Couldn't connect to server\n",
            "connection refused",
            False,
        ),
        (
            f"fatal: unable to access '{URL}/': Recv failure: Connection reset by peer\n",
            "the server did not answer (connection reset)",
            False,
        ),
        (
            f"fatal: unable to access '{URL}/': Empty reply from server\n",
            "the server did not answer (connection reset)",
            False,
        ),
        (
            "fatal: unable to access 'http://nowhere.invalid/x.git/': Could not resolve host: "
            "nowhere.invalid\n",
            "host name not found",
            False,
        ),
        (
            f"fatal: unable to access '{URL}/': The requested URL returned error: 503\n",
            "server error",
            False,
        ),
        ("error: something new\n", "failed", False),
    ],
)
def test_a_clone_failure_is_told_in_a_few_words_and_only_a_lasting_one_is_permanent(
    stderr: str, words: str, permanent: bool
) -> None:
    failure = clone_failure("Cloning into '/workspace/app.partial'...\n" + stderr)
    assert (failure.words, failure.permanent) == (words, permanent)
    # One line: git's first fatal line is the detail, never the "Cloning into" chatter.
    text = clone_failure_text(URL, failure)
    assert text.startswith(f"cloning {URL}: {words} (") and "\n" not in text
    assert "Cloning into" not in text
