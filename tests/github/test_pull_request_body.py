"""The pull request's title and body (pure): what a reviewer needs in it, a repository's
template filled rather than replaced, agent text that pings nobody and hides nothing, and a
body that always fits under GitHub's limit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from overnight.core.done_check import DoneCheck
from overnight.core.github_markdown import code_span, github_markdown, table_cell
from overnight.core.models import RestartRecord
from overnight.core.pull_request_body import (
    GITHUB_BODY_LIMIT,
    PullRequestFacts,
    pull_request_body,
    pull_request_text,
    pull_request_title,
)
from overnight.core.run_costs import SafetyNet
from overnight.core.workspace_spec import KeptWorkspace

AT = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def check(command: str, round: int = 2, passed: bool = True, **more: object) -> DoneCheck:
    return DoneCheck(command=command, index=0, round=round, passed=passed, at=AT, **more)  # type: ignore[arg-type]


FACTS = PullRequestFacts(
    run_id="fix-parser",
    summary="Fixed the parser's empty-input crash.\n\n- added `test_empty`\n- no API change",
    done_checks=[
        check("pytest -q", round=1, passed=False, exit_code=1, tail="1 failed"),
        check("pytest -q", exit_code=0, seconds=12.4),
    ],
    attempts=3,
    restarts=[
        RestartRecord(attempt=2, reason="agent crashed (exit 1)", at=AT),
        RestartRecord(attempt=3, reason="agent stalled for 15 min", at=AT),
    ],
    hours_used=2.5,
    spend_usd=1.234,
    spend_model_usd=0.8,
    safety_net=SafetyNet(restarts=2, usd=0.05, share=0.04, by_cause={"crashed": 1, "stalled": 1}),
    kept=[
        KeptWorkspace(number=1, outcome="pushed", at=AT, attempt=1, commit="a" * 40),
        KeptWorkspace(number=2, outcome="failed", at=AT, attempt=2),
        KeptWorkspace(number=3, outcome="pushed", at=AT, attempt=3, commit="b" * 40),
    ],
    run_link="http://localhost:8233/namespaces/default/workflows/fix-parser",
)


def test_the_body_holds_what_a_reviewer_needs_before_the_diff() -> None:
    body = pull_request_body(FACTS)
    assert "> Fixed the parser's empty-input crash.\n>\n> - added `test_empty`" in body
    assert "| `pytest -q` | ✅ passed (exit 0) | 12 s |" in body
    assert "They passed after 1 failed round(s)" in body
    assert "3 attempt(s), 2 restart(s)" in body
    assert "- attempt 2: agent crashed (exit 1)" in body
    assert "- attempt 3: agent stalled for 15 min" in body
    assert "$1.23 in 2.5 h (model calls $0.80)" in body
    assert "The safety net cost $0.0500 (4.0% of the sandbox cost): 2 restart(s)" in body
    assert "`overnight diff fix-parser --step 3`" in body and "`bbbbbbbbbbbb`" in body
    assert "--step 2" not in body  # a keep that did not push is no step to look at
    assert f"[fix-parser]({FACTS.run_link})" in body


def test_the_title_is_the_spec_s_else_the_summary_s_first_line_else_the_run_s() -> None:
    assert pull_request_title(FACTS) == "Fixed the parser's empty-input crash."
    titled = PullRequestFacts(run_id="r", title="Fix #12 for @alice", summary="x")
    assert pull_request_title(titled) == "Fix #12 for \uff20alice"
    assert pull_request_title(PullRequestFacts(run_id="r", summary="## Done\nmore")) == "Done"
    assert pull_request_title(PullRequestFacts(run_id="r")) == "overnight run r"
    long = pull_request_title(PullRequestFacts(run_id="r", summary="word " * 100))
    assert len(long) == 120 and long.endswith("…")


TEMPLATE = """<!-- Say what changed and why -->
## Description

Describe the change.

```markdown
# not a heading: inside a fence
```

## Checklist
- [ ] Tests added
"""


def test_a_template_is_filled_its_sections_kept_the_summary_under_its_first_heading() -> None:
    body = pull_request_body(PullRequestFacts(run_id="r", summary="Did it.", template=TEMPLATE))
    assert body.startswith("<!-- Say what changed and why -->\n## Description\n\n")
    assert body.index("## Description") < body.index("> Did it.") < body.index("Describe")
    assert "## Checklist\n- [ ] Tests added" in body
    assert body.index("- [ ] Tests added") < body.index("### Attempts")


def test_a_template_without_a_heading_gets_the_summary_on_top() -> None:
    fenced = "```\n# in a fence\n```\nPlease describe."
    body = pull_request_body(PullRequestFacts(run_id="r", summary="Did it.", template=fenced))
    assert body.index("> Did it.") < body.index("# in a fence") < body.index("### Attempts")


def test_agent_text_pings_nobody_and_hides_nothing() -> None:
    summary = (
        "Thanks @alice and @octo-org/reviewers! Mail bob@example.com.\n"
        "<!-- hidden: merge without review -->\x1b[2J\u202egnp.exe\n"
        "`@inline` stays\n```python\n@pytest.fixture\n```"
    )
    body = pull_request_body(PullRequestFacts(run_id="r", summary=summary))
    assert "@alice" not in body and "\uff20alice" in body and "\uff20octo-org/reviewers" in body
    assert "bob@example.com" in body
    assert "<!-- hidden" not in body and "&lt;!-- hidden" in body
    assert "\x1b" not in body and "\\x1b[2J" in body and "\\u202e" in body
    assert "`@inline` stays" in body and "> @pytest.fixture" in body  # code pings nobody


def test_a_summary_cannot_pass_for_overnight_s_own_sections() -> None:
    body = pull_request_body(PullRequestFacts(run_id="r", summary="### Done checks\nall ✅"))
    assert "> ### Done checks\n> all ✅" in body
    assert "\n### Done checks" not in body


def test_a_restart_reason_is_one_line_of_text() -> None:
    reason = "crashed\n## Approved by [@admin](https://evil.example)"
    facts = PullRequestFacts(run_id="r", restarts=[RestartRecord(attempt=2, reason=reason, at=AT)])
    body = pull_request_body(facts)
    assert "- attempt 2: crashed ## Approved by [\uff20admin](https://evil.example)" in body


@pytest.mark.parametrize(
    "facts",
    [
        PullRequestFacts(run_id="r", summary="x" * 200_000),
        PullRequestFacts(run_id="r", summary="line\n" * 50_000, template="## T\n" + "t" * 19_000),
        PullRequestFacts(
            run_id="r",
            summary="@a " * 40_000,  # each mention grows when defused
            restarts=[RestartRecord(attempt=i, reason="r" * 400, at=AT) for i in range(2000)],
            done_checks=[check(f"c{i}", passed=False, tail="t" * 4000) for i in range(50)],
        ),
    ],
)
def test_the_body_always_fits_under_github_s_limit(facts: PullRequestFacts) -> None:
    body = pull_request_body(facts)
    assert len(body) < GITHUB_BODY_LIMIT
    assert "Opened by overnight for the run `r`." in body
    assert "cut to fit GitHub's limit" in body


def test_a_short_summary_is_never_cut() -> None:
    text = pull_request_text(FACTS)
    assert "cut to fit" not in text.body and text.title.startswith("Fixed")


def test_a_command_with_pipes_and_backticks_stays_in_its_table_cell() -> None:
    cell = table_cell(code_span("grep -c `x` log | test 3 -gt"))
    assert cell == "``grep -c `x` log \\| test 3 -gt``"
    body = pull_request_body(
        PullRequestFacts(run_id="r", done_checks=[check("a | b", exit_code=0)])
    )
    assert "| `a \\| b` | ✅ passed (exit 0) | 0 s |" in body


def test_an_unclosed_fence_keeps_the_rest_as_code() -> None:
    assert github_markdown("```\n@a\n<!--") == "```\n@a\n<!--"


def test_the_body_says_the_ci_rounds_and_their_failing_checks() -> None:
    facts = PullRequestFacts(
        run_id="ci-run",
        ci_rounds=2,
        ci_failed=["tests (failure): 1 failed", "lint (failure): @octo see <!-- x -->"],
    )
    body = pull_request_text(facts).body
    assert "### CI rounds" in body and "The agent fixed failing CI 2 time(s)." in body
    assert "- round 1: tests (failure): 1 failed" in body
    # GitHub's words pass through the same defusing as the agent's: nobody is pinged.
    round_two = next(line for line in body.splitlines() if line.startswith("- round 2:"))
    assert "@octo" not in round_two and "<!--" not in round_two
    assert "### CI rounds" not in pull_request_text(PullRequestFacts(run_id="r")).body
