"""Acting on a run from its page: answer the agent's question, extend a budget, cancel with a
reason, rewind to a kept step. Each is a POST an operator sends with the CSRF token
(`auth.operator`), and each goes through the same signal or update as the CLI
(overnight/cli/client.py: `answer_question`, `extend_budget_and_wait`, `cancel_run`;
overnight/cli/workspace.py: `rewind_run`).

Sent is not taken: after each, the `status` query is asked until it shows the run took it
(bounded by `CONFIRM_SECONDS`), then the browser goes back to the run's page with a notice
saying which (`NOTICES`: the console's own words, chosen by a key, so a link cannot put words
of its own on the page). A refusal (no question waits, a bad number, an ended run) is a page
saying why, the run's words in it as text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from overnight.cli import client as api
from overnight.cli.workspace import rewind_run
from overnight.console import auth, render
from overnight.console.context import console_of
from overnight.core.errors import OvernightError
from overnight.core.models import Budget, BudgetExtension, RunStatus

# How long an action waits for the status to show the run took it.
CONFIRM_SECONDS = 20.0
ASK_EVERY_SECONDS = 0.5
MAX_REASON_CHARS = 500
# What the page says after an action: taken (the status shows it), or only sent.
NOTICES = {
    "answer-taken": "The run took your answer: its agent goes on with it.",
    "answer-sent": "Your answer was accepted; the run has not woken its agent yet.",
    "extend-taken": "The run took the extension: its budget is larger now.",
    "extend-woke": "The run took the extension and goes on.",
    "extend-held": "The run took the extension, but has not gone on yet.",
    "cancel-taken": "The run took the cancel: it is ending.",
    "cancel-sent": "The cancel was sent; the run has not taken it yet.",
    "rewind-taken": "The run took the rewind: a new sandbox starts from that step.",
    "rewind-sent": "The rewind was accepted; the run has not started from that step yet.",
}
_EXTEND_FIELDS = {
    "hours": float,
    "spend_usd": float,
    "restarts": int,
    "wait_hours": float,
    "done_checks": int,
}


class Refused(Exception):
    """An action the run (or the form) refused, and why, in a sentence."""


async def answer(request: Request) -> Response:
    await auth.operator(request)
    run_id, client, form = await _begin(request)
    text = _field(form, "answer")
    try:
        if not text.strip():
            raise Refused("the answer is empty")
        await api.answer_question(client, run_id, text)
    except (Refused, OvernightError, RPCError) as err:
        return _refused(request, run_id, "answer", err)

    def taken(status: RunStatus) -> bool:
        waiting = status.talk is not None and status.talk.question is not None
        return status.state != "waiting_for_answer" and not waiting

    return _back(
        run_id, "answer-taken" if await until_status(client, run_id, taken) else "answer-sent"
    )


async def extend(request: Request) -> Response:
    await auth.operator(request)
    run_id, client, form = await _begin(request)
    try:
        extension = extension_of(form)
        before = await _status_or_none(client, run_id)
        budget = await api.extend_budget_and_wait(client, run_id, extension)
    except (Refused, OvernightError, RPCError) as err:
        return _refused(request, run_id, "extend", err)
    held = before is not None and before.state == "needs_attention"

    def taken(status: RunStatus) -> bool:
        return covers(status.budget, budget) and (not held or status.state != "needs_attention")

    went_on = await until_status(client, run_id, taken)
    key = "extend-taken" if not held else "extend-woke" if went_on else "extend-held"
    return _back(run_id, key)


async def cancel(request: Request) -> Response:
    await auth.operator(request)
    run_id, client, form = await _begin(request)
    reason = " ".join(_field(form, "reason").split())[:MAX_REASON_CHARS] or None
    try:
        await api.cancel_run(client, run_id, reason)
    except (OvernightError, RPCError) as err:
        return _refused(request, run_id, "cancel", err)

    def taken(status: RunStatus) -> bool:
        return status.state in ("finishing", "cancelled")

    ended = await until_status(client, run_id, taken, closed_counts=True)
    return _back(run_id, "cancel-taken" if ended else "cancel-sent")


async def rewind(request: Request) -> Response:
    await auth.operator(request)
    run_id, client, form = await _begin(request)
    try:
        step = _whole(_field(form, "to"), "the step to rewind to")
        before = await _status_or_none(client, run_id)
        await rewind_run(client, run_id, step)
    except (Refused, OvernightError, RPCError) as err:
        return _refused(request, run_id, "rewind", err)
    rewinds = _rewinds(before)

    def taken(status: RunStatus) -> bool:
        return _rewinds(status) > rewinds

    return _back(
        run_id, "rewind-taken" if await until_status(client, run_id, taken) else "rewind-sent"
    )


def extension_of(form: dict[str, str]) -> BudgetExtension:
    """The extension the form asks for (an empty field adds nothing); `Refused` says what is
    wrong with it."""
    values: dict[str, float | int] = {}
    for name, kind in _EXTEND_FIELDS.items():
        text = form.get(name, "").strip()
        if not text:
            continue
        try:
            values[name] = kind(text)
        except ValueError:
            raise Refused(f"{name.replace('_', ' ')}: {text!r} is not a number") from None
    try:
        extension = BudgetExtension.model_validate(values)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())).replace("_", " ")
        raise Refused(f"{where}: {first.get('msg', 'invalid')}") from None
    if extension.is_empty():
        raise Refused("the extension adds nothing: fill in at least one budget")
    return extension


def covers(now: Budget, extended: Budget) -> bool:
    """Whether the run's budget `now` is at least the `extended` one the update answered."""
    mine, theirs = now.model_dump(), extended.model_dump()
    return all(
        theirs[name] is None or (mine[name] is not None and mine[name] >= theirs[name])
        for name in theirs
    )


async def until_status(
    client: Client,
    run_id: str,
    taken: Callable[[RunStatus], bool],
    *,
    closed_counts: bool = False,
    within: float = CONFIRM_SECONDS,
) -> bool:
    """Whether the status shows `taken` within `within` seconds (`closed_counts`: or the
    run has closed)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        status = await _status_or_none(client, run_id)
        if status is not None and taken(status):
            return True
        if closed_counts and await _closed(client, run_id):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(ASK_EVERY_SECONDS)


async def _status_or_none(client: Client, run_id: str) -> RunStatus | None:
    try:
        return await api.get_status(client, run_id)
    except (OvernightError, RPCError):
        return None


async def _closed(client: Client, run_id: str) -> bool:
    try:
        described = await client.get_workflow_handle(run_id).describe()
    except RPCError:
        return False
    return described.status != WorkflowExecutionStatus.RUNNING


def _rewinds(status: RunStatus | None) -> int:
    if status is None or status.workspace is None:
        return 0
    return status.workspace.rewinds


async def _begin(request: Request) -> tuple[str, Client, dict[str, str]]:
    form = await request.form()
    fields = {key: value for key, value in form.items() if isinstance(value, str)}
    return request.path_params["run_id"], console_of(request).client, fields


def _field(form: dict[str, str], name: str) -> str:
    return form.get(name, "")


def _whole(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise Refused(f"{what} must be a whole number") from None


def run_url(run_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}"


def _back(run_id: str, notice: str) -> Response:
    return RedirectResponse(f"{run_url(run_id)}?done={notice}#acting", status_code=303)


_VERBS = {
    "answer": "took no answer",
    "extend": "took no extension",
    "cancel": "was not cancelled",
    "rewind": "was not rewound",
}


def _refused(request: Request, run_id: str, action: str, err: Exception) -> Response:
    why = err.message if isinstance(err, RPCError) else str(err)
    context = {"run_id": run_id, "run_url": run_url(run_id), "verb": _VERBS[action], "why": why}
    status = 400 if isinstance(err, Refused) else 409
    return render.page(request, "run_refused.html", context, status=status)


def _post(path: str, handler: Callable[[Request], Awaitable[Response]]) -> Route:
    return Route(path, handler, methods=["POST"])


routes: list[BaseRoute] = [
    _post("/runs/{run_id}/answer", answer),
    _post("/runs/{run_id}/extend", extend),
    _post("/runs/{run_id}/cancel", cancel),
    _post("/runs/{run_id}/rewind", rewind),
]
