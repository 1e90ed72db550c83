"""Where a commit's CI stands: its check runs and its commit statuses, in one verdict.

GitHub keeps two kinds of report: check runs (GitHub Actions, Apps) and commit statuses (the
older API many CI services use). `read_checks` reads both (`GET /commits/{sha}/check-runs`
and `/status`), each with its ETag so an unchanged poll costs no request of the rate limit,
and `combine` (pure) says:

- `failure` when any check run completed as failure, timed out, was cancelled, needs action
  or failed to start, or any status context's latest is `error` or `failure`; the failures
  are named, with what the API gives of them (a check run's title, summary and the tail of
  its text; a status's description and link);
- `pending` while any check run is not completed or any status is `pending`;
- `success` when something reported and all of it passed (`neutral` and `skipped` pass);
- `none` when nothing reported at all (a repository without CI, or CI not started yet: the
  caller decides how long to wait for a first report).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from activities.github.client import GitHubClient, path_part
from activities.github.repo_url import GitHubRepo
from overnight.core.output_tail import cut_tail

ChecksVerdict = Literal["pending", "success", "failure", "none"]
FAILED_CONCLUSIONS = frozenset(
    {"failure", "timed_out", "cancelled", "action_required", "startup_failure", "stale"}
)
# What a failure's text keeps: its end, where a log says what broke.
TAIL_LINES = 40
TAIL_BYTES = 4096
SUMMARY_CHARS = 1000
# One page of check runs (GitHub's largest); a commit with more reports is rare.
PER_PAGE = "100"


@dataclass(frozen=True)
class FailedCheck:
    name: str
    kind: Literal["check_run", "status"]
    conclusion: str  # the check run's conclusion, or the status's state
    title: str = ""
    summary: str = ""
    log_tail: str = ""
    url: str = ""


@dataclass(frozen=True)
class ChecksState:
    verdict: ChecksVerdict
    sha: str
    failed: tuple[FailedCheck, ...] = ()
    pending: tuple[str, ...] = ()
    passed: tuple[str, ...] = ()
    # Both answers came from the ETag cache (`304`): nothing changed since the last poll.
    unchanged: bool = False


def read_checks(client: GitHubClient, repo: GitHubRepo, sha: str) -> ChecksState:
    """The verdict of the check runs and statuses reported on commit `sha`."""
    base = f"/repos/{path_part(repo.owner)}/{path_part(repo.name)}/commits/{path_part(sha)}"
    runs = client.get(f"{base}/check-runs", {"per_page": PER_PAGE})
    statuses = client.get(f"{base}/status", {"per_page": PER_PAGE})
    run_list = runs.data.get("check_runs", []) if isinstance(runs.data, dict) else []
    status_list = statuses.data.get("statuses", []) if isinstance(statuses.data, dict) else []
    state = combine(sha, run_list, status_list)
    if runs.from_cache and statuses.from_cache:
        return ChecksState(
            state.verdict, sha, state.failed, state.pending, state.passed, unchanged=True
        )
    return state


def combine(sha: str, check_runs: Sequence[Any], statuses: Sequence[Any]) -> ChecksState:
    """The one verdict of a commit's check runs and statuses (each as the API gives it)."""
    failed: list[FailedCheck] = []
    pending: list[str] = []
    passed: list[str] = []
    for run in (r for r in check_runs if isinstance(r, dict)):
        name = str(run.get("name") or "check run")
        conclusion = run.get("conclusion")
        if run.get("status") != "completed" or conclusion is None:
            pending.append(name)
        elif conclusion in FAILED_CONCLUSIONS:
            failed.append(_failed_run(name, str(conclusion), run))
        else:
            passed.append(name)
    latest: dict[str, dict[str, Any]] = {}
    for status in (s for s in statuses if isinstance(s, dict)):
        latest.setdefault(str(status.get("context") or "status"), status)  # newest first
    for context, status in latest.items():
        state = str(status.get("state"))
        if state in ("error", "failure"):
            failed.append(
                FailedCheck(
                    name=context,
                    kind="status",
                    conclusion=state,
                    summary=str(status.get("description") or "")[:SUMMARY_CHARS],
                    url=str(status.get("target_url") or ""),
                )
            )
        elif state == "success":
            passed.append(context)
        else:
            pending.append(context)
    verdict: ChecksVerdict
    if failed:
        verdict = "failure"
    elif pending:
        verdict = "pending"
    else:
        verdict = "success" if passed else "none"
    return ChecksState(verdict, sha, tuple(failed), tuple(pending), tuple(passed))


def _failed_run(name: str, conclusion: str, run: dict[str, Any]) -> FailedCheck:
    output = run.get("output") if isinstance(run.get("output"), dict) else {}
    assert isinstance(output, dict)
    text = str(output.get("text") or "")
    tail = cut_tail(text.encode(), [], from_start=True, lines=TAIL_LINES, max_bytes=TAIL_BYTES)
    return FailedCheck(
        name=name,
        kind="check_run",
        conclusion=conclusion,
        title=str(output.get("title") or ""),
        summary=str(output.get("summary") or "")[:SUMMARY_CHARS],
        log_tail=tail.text,
        url=str(run.get("details_url") or run.get("html_url") or ""),
    )
