"""What no retry fixes is told apart from what one may (activities/git_words.py), and the
spec's folders that are not on the worker are named at the start (activities/spec_paths_here.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.git_words import clone_failure, clone_failure_text
from activities.spec_paths_here import missing_paths
from overnight.models import RunSpec

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


def test_folders_not_on_the_worker_are_named_at_the_start(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    spec = RunSpec(
        run_id="r",
        repo=str(tmp_path / "no-repo"),
        agent_dir=str(tmp_path / "no-agent"),
        command="true",
    )
    assert missing_paths(spec) == [
        f"field agent_dir: {tmp_path}/no-agent is not a folder on this worker "
        "(fix it and start the run again)",
        f"field repo: {tmp_path}/no-repo does not exist on this worker "
        "(fix it and start the run again)",
    ]
    remote = spec.model_copy(update={"repo": URL, "agent_dir": str(agent)})
    assert missing_paths(remote) == []
    assert missing_paths(remote.model_copy(update={"repo": "git@host:x.git"})) == []
    gone = remote.model_copy(update={"repo": f"file://{tmp_path}/gone"})
    assert missing_paths(gone) == [
        f"field repo: file://{tmp_path}/gone does not exist on this worker "
        "(fix it and start the run again)"
    ]
