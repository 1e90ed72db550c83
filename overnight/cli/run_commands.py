"""`overnight status`, `list`, `cancel`, `extend`, `push`, `answer` and `reap`: the commands
that read runs, or steer one, through the Temporal server (`reap` also deletes sandboxes)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from pydantic import ValidationError

from overnight.cli import client as api
from overnight.cli import render
from overnight.cli.commands import FAILED, OK, BadInput, Command
from overnight.cli.connecting import connect, ui_url
from overnight.cli.help_texts import JSON_HELP
from overnight.cli.retrying import retrying_lines, with_waiting_on
from overnight.cli.run_names import RUN_NAME_HELP
from overnight.core.models import BudgetExtension

REAP_HERE_ONLY = (
    "reaped what this host holds alone (finished half-done deletes, and the local sandboxes "
    "kept after their run ended: deleted past their keep-until, else let go of their host "
    "processes); closed runs' other sandboxes, snapshots, session stores and kept "
    "workspaces' refs wait for a reap with the server"
)


def _now() -> datetime:
    return datetime.now(UTC)


def _one_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help=RUN_NAME_HELP)


def _status_arguments(status: argparse.ArgumentParser) -> None:
    status.add_argument("run_id", help=RUN_NAME_HELP)
    status.add_argument("--json", action="store_true", help=JSON_HELP)


async def _status(args: argparse.Namespace) -> int:
    client = await connect(args)
    workflow_id = await api.workflow_id_of(client, args.run_id)
    status = await api.get_status(client, workflow_id)
    if args.json:
        print(render.json_document(status))
    else:
        print(render.status_text(status, now=_now(), ui_url=ui_url(client, workflow_id)))
        # What it waits on meanwhile (a create retried while the worker is low on disk).
        for line in await retrying_lines(client, workflow_id, _now()):
            print(line)
    return OK


def _list_arguments(listing: argparse.ArgumentParser) -> None:
    listing.add_argument("--open", action="store_true", help="only runs still going")
    listing.add_argument("--json", action="store_true", help=JSON_HELP)


async def _list(args: argparse.Namespace) -> int:
    client = await connect(args)
    runs = await api.list_runs(client, open_only=args.open)
    runs = await with_waiting_on(client, runs, _now())
    print(render.json_document(runs) if args.json else render.runs_text(runs, now=_now()))
    return OK


def _cancel_arguments(cancel: argparse.ArgumentParser) -> None:
    cancel.add_argument("run_id", help=RUN_NAME_HELP)
    cancel.add_argument(
        "--reason", help="why (in the run's history and its `cancelled` notification)"
    )


async def _cancel(args: argparse.Namespace) -> int:
    client = await connect(args)
    await api.cancel_run(client, await api.workflow_id_of(client, args.run_id), args.reason)
    print(f"asked {args.run_id} to cancel")
    return OK


def _extend_arguments(extend: argparse.ArgumentParser) -> None:
    extend.add_argument("run_id", help=RUN_NAME_HELP)
    extend.add_argument(
        "--restarts", type=int, default=0, metavar="N", help="restarts more it may use"
    )
    extend.add_argument("--hours", type=float, default=0, metavar="H", help="hours more it may run")
    extend.add_argument(
        "--spend",
        type=float,
        default=0,
        metavar="USD",
        help="dollars more it may spend (sandboxes and the model spend its agent reports)",
    )
    extend.add_argument(
        "--wait-hours",
        type=float,
        default=0,
        metavar="H",
        help="hours more the agent's questions and waits may pause it",
    )
    extend.add_argument(
        "--done-checks",
        type=int,
        default=0,
        metavar="N",
        help="failed rounds more of the done check (done_when) before it needs you again",
    )
    extend.add_argument(
        "--ci-rounds",
        type=int,
        default=0,
        metavar="N",
        help="rounds more its agent may fix a failing CI check of its pull request",
    )


async def _extend(args: argparse.Namespace) -> int:
    try:
        extension = BudgetExtension(
            restarts=args.restarts,
            hours=args.hours,
            spend_usd=args.spend,
            wait_hours=args.wait_hours,
            done_checks=args.done_checks,
            ci_rounds=args.ci_rounds,
        )
    except ValidationError as err:
        first = err.errors()[0]
        flag = str(first["loc"][0]).replace("spend_usd", "spend").replace("_", "-")
        raise BadInput(f"--{flag}: {first['msg']}") from None
    if extension.is_empty():
        raise BadInput(
            "nothing to add: give --restarts, --hours, --spend, --wait-hours, --done-checks "
            "or --ci-rounds"
        )
    client = await connect(args)
    await api.extend_budget(client, await api.workflow_id_of(client, args.run_id), extension)
    print(f"asked {args.run_id} to extend its budget by {render.extension_text(extension)}")
    return OK


async def _push(args: argparse.Namespace) -> int:
    client = await connect(args)
    said = await api.push_again(client, await api.workflow_id_of(client, args.run_id))
    print(f"{args.run_id}: {said}")
    return OK


def _answer_arguments(answer: argparse.ArgumentParser) -> None:
    answer.add_argument("run_id", help=RUN_NAME_HELP)
    answer.add_argument("text", help="the answer (one of the question's choices, if it has any)")


async def _answer(args: argparse.Namespace) -> int:
    client = await connect(args)
    said = await api.answer_question(
        client, await api.workflow_id_of(client, args.run_id), args.text
    )
    print(f"{args.run_id}: {said}")
    return OK


def _reap_arguments(reap: argparse.ArgumentParser) -> None:
    reap.add_argument(
        "--paused", action="store_true", help="every paused one of a closed run too, kept or not"
    )
    reap.add_argument("--json", action="store_true", help=JSON_HELP)


async def _reap(args: argparse.Namespace) -> int:
    from activities.providers.registry import open_configured
    from overnight.core.errors import ServerUnreachable
    from overnight.worker.reaping import reap_here

    try:
        client = await connect(args)
    except ServerUnreachable as err:
        # What this host holds is judged by its own files: no server needed for it.
        print(f"overnight reap: {err}; {REAP_HERE_ONLY}", file=sys.stderr)
        async with open_configured() as providers:
            reaped = await reap_here(providers, include_paused=args.paused)
    else:
        async with open_configured() as providers:
            reaped = await api.reap(client, providers, include_paused=args.paused)
    print(render.json_document(reaped) if args.json else render.reaped_text(reaped))
    return OK if all(entry.stopped for entry in reaped) else FAILED


COMMANDS = (
    Command("status", "show one run", _status_arguments, _status),
    Command("list", "list runs", _list_arguments, _list),
    Command("cancel", "cancel a run", _cancel_arguments, _cancel),
    Command(
        "extend",
        "add to a run's budget",
        _extend_arguments,
        _extend,
        description="Add to a run's budget; a run that needs attention for its budget goes on.",
    ),
    Command(
        "push",
        "try a run's push (or its pull request) again now",
        _one_run,
        _push,
        description=(
            "Try again now what a run waits on to deliver its work: the push of its branch "
            "(or of a kept workspace) the origin refused, its pull request, or a look at its "
            "CI; what `extend` does for them, without adding to the budget. Refused when the "
            "run waits on none of them."
        ),
    ),
    Command("answer", "answer the question a run's agent asks", _answer_arguments, _answer),
    Command(
        "reap",
        "delete sandboxes no run needs (closed runs', past retention); says the disk freed",
        _reap_arguments,
        _reap,
    ),
)
