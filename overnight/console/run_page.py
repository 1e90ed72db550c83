"""One run's page (`/runs/{run_id}`) and its live events (`/runs/{run_id}/events`).

The page: what holds the run and what a person may do about it (the question with its
choices as buttons, the budgets to extend, cancel, rewind: overnight/console/run_actions.py),
the timeline and the budgets as pictures, the checkpoint's notes, the outputs and the pull
request, the kept workspace's diff per step, and the agent's output. The events keep it
fresh: the facts (state, timeline, budgets) when the status changes, the acting panel when
what may be done changes (so a half-typed answer is not wiped by a new spend figure), and
the output's new lines as they come (overnight/console/run_output.py).

Everything a run, a spec or an agent wrote reaches the templates as data, escaped there.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from temporalio.service import RPCError

from overnight.cli.workspace import kept_before
from overnight.console import auth, diff_view, events, run_actions, run_data, timeline
from overnight.console.context import console_of
from overnight.console.limits import ReadersStream
from overnight.console.render import fragment, page
from overnight.console.run_data import RunData
from overnight.console.run_output import OutputLines, follow_output
from overnight.console.timeline_svg import budget_bars, draw_timeline
from overnight.core.errors import OvernightError, RunNotFound

# How often a page's stream asks the run's status (and reads its history when it changed).
STATUS_EVERY_SECONDS = 2.0
KEEP_ALIVE_SECONDS = 15.0
# Past this many lines sent since the output was last sent whole, it is sent whole again (the
# kept lines only), so a page left open for a night holds a bounded output.
RESEND_AFTER_LINES = 2000


async def run_page(request: Request) -> Response:
    seen = await auth.viewer(request)
    run_id = request.path_params["run_id"]
    client = console_of(request).client
    try:
        data = await run_data.load(client, run_id)
    except RunNotFound as err:
        return page(request, "run_missing.html", {"run_id": run_id, "why": str(err)}, 404)
    except (OvernightError, RPCError) as err:
        why = getattr(err, "message", None) or str(err)
        return page(request, "run_missing.html", {"run_id": run_id, "why": why}, 503)
    context = facts_context(data)
    context.update(acts_context(data, seen.may_act))
    context.update(await diff_context(client, data, request.query_params.get("step")))
    notice = run_actions.NOTICES.get(request.query_params.get("done", ""))
    context.update(notice=notice, events_url=f"{run_actions.run_url(run_id)}/events")
    return page(request, "run.html", context)


def facts_context(data: RunData) -> dict[str, Any]:
    """What the facts panel draws: the state, the timeline, the budgets, the notes, the
    outputs and the pull request."""
    status = data.status
    drawn = None
    if status is not None:
        built = timeline.build(status, data.marks, run_data.now(), data.closed_at)
        drawn = draw_timeline(built)
    outputs = status.outputs if status is not None else None
    if outputs is None and data.result is not None:
        outputs = data.result.outputs
    pr = status.pull_request_url if status is not None else None
    if pr is None and data.result is not None:
        pr = data.result.pull_request_url
    return {
        "data": data,
        "run_id": data.run_id,
        "state": run_data.shown_state(data),
        "status": status,
        "timeline": drawn,
        "bars": budget_bars(status) if status is not None else [],
        "notes": run_data.checkpoint_notes(data),
        "next_step": run_data.next_step(data),
        "outputs": outputs,
        "pull_request": run_data.safe_pull_request(pr),
    }


def acts_context(data: RunData, may_act: bool) -> dict[str, Any]:
    """What the acting panel offers: the question (its choices as buttons, a text field
    when it has none), the budgets, cancel, and the steps a rewind may go to."""
    status = data.status
    talk = status.talk if status is not None else None
    question = talk if talk is not None and talk.question else None
    steps = [k for k in run_data.kept_steps(status) if k.outcome == "pushed" and k.commit]
    return {
        "run_id": data.run_id,
        "run_url": run_actions.run_url(data.run_id),
        "may_act": may_act,
        "open": data.open,
        "state": run_data.shown_state(data),
        "question": question,
        "attention": status.attention_reason if status is not None else None,
        "rewind_steps": steps,
        "can_rewind": data.open and status is not None and status.state == "running" and steps,
    }


def acts_key(data: RunData) -> tuple[Any, ...]:
    """What the acting panel depends on: it is redrawn only when this changes."""
    status = data.status
    if status is None:
        return (data.open, None)
    talk = status.talk
    question = (talk.question, tuple(talk.choices)) if talk is not None else None
    steps = tuple(k.number for k in run_data.kept_steps(status))
    return (data.open, status.state, question, status.attention_reason, steps)


async def diff_context(client: Any, data: RunData, asked: str | None) -> dict[str, Any]:
    status = data.status
    kept = run_data.kept_steps(status)
    step = run_data.chosen_step(status, asked)
    shown, problem = None, None
    if step is not None:
        try:
            repo = await run_data.spec_repo(client, data.run_id)
            view = status.workspace if status is not None else None
            base = view.base if view is not None else None
            since = kept_before(view.kept, step) if view is not None else None
            shown = await diff_view.kept_diff(repo, step, base, since)
        except (OvernightError, RPCError, OSError, subprocess.SubprocessError) as err:
            problem = getattr(err, "message", None) or str(err)
    elif asked is not None and kept:
        problem = f"step {asked} has no kept workspace to show"
    return {"kept": kept, "step": step, "diff": shown, "diff_problem": problem}


async def run_events(request: Request) -> Response:
    seen = await auth.viewer(request)
    run_id = request.path_params["run_id"]
    context = console_of(request)
    token = auth.csrf_token(context.settings, seen)
    stream = events.stream(_changes(request, run_id, seen.may_act, token), context.stopping)
    return ReadersStream(stream, context.streams, seen.session_id)


async def _changes(request: Request, run_id: str, may_act: bool, csrf: str) -> AsyncIterator[str]:
    client = console_of(request).client
    out = OutputLines()
    follower = asyncio.create_task(follow_output(client, run_id, out))
    loop = asyncio.get_running_loop()
    sent, whole_at = 0, 0
    facts_html = acts = None
    data: RunData | None = None
    next_status = quiet_since = loop.time()
    try:
        while not await request.is_disconnected():
            said = False
            fresh = out.since(sent)
            if fresh and (sent == 0 or sent - whole_at > RESEND_AFTER_LINES):
                yield events.replace("run-output", fragment("_run_output.html", {"lines": fresh}))
                sent = whole_at = fresh[-1][0]
                said = True
            elif fresh:
                html = fragment("_output_lines.html", {"lines": fresh, "first": fresh[0][0]})
                yield events.replace(f"out-{fresh[0][0]}", html, parent="run-output")
                sent, said = fresh[-1][0], True
            if loop.time() >= next_status:
                next_status = loop.time() + STATUS_EVERY_SECONDS
                try:
                    data = await run_data.load(client, run_id, data)
                except (OvernightError, RPCError):
                    data = None
                if data is not None and not data.open:
                    next_status = float("inf")  # an ended run changes no more
                if data is not None:
                    html = fragment("_run_facts.html", facts_context(data))
                    if facts_html is not None and html != facts_html:
                        yield events.replace("run-facts", html)
                        said = True
                    facts_html = html
                    key = acts_key(data)
                    if acts is not None and key != acts:
                        context = {**acts_context(data, may_act), "csrf_token": csrf}
                        panel = fragment("_run_acts.html", context)
                        yield events.replace("run-acts", panel)
                        said = True
                    acts = key
            if said:
                quiet_since = loop.time()
            elif loop.time() - quiet_since >= KEEP_ALIVE_SECONDS:
                yield events.KEEP_ALIVE
                quiet_since = loop.time()
            out.changed.clear()
            try:
                await asyncio.wait_for(out.changed.wait(), timeout=1.0)
            except TimeoutError:
                pass
    finally:
        follower.cancel()


routes: list[BaseRoute] = [
    Route("/runs/{run_id}", run_page, methods=["GET"]),
    Route("/runs/{run_id}/events", run_events, methods=["GET"]),
    *run_actions.routes,
]
