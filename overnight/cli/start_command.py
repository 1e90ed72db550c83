"""`overnight start`: a run from a spec file, from `--agent` and its options, or many runs from
`--many TASKS.jsonl`; it says what the worker says of the run's start unless `--no-wait`, and
the run's result with `--wait`."""

from __future__ import annotations

import argparse
import os
import sys

from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from overnight.cli import agents as agents_cli
from overnight.cli import client as api
from overnight.cli import many as many_cli
from overnight.cli import render, start_look
from overnight.cli.commands import OK, BadInput, Command
from overnight.cli.connecting import connect, ui_url
from overnight.cli.help_texts import JSON_HELP, TASK_QUEUE_HELP
from overnight.cli.spec_size import too_large
from overnight.core.constants import TASK_QUEUE
from overnight.core.errors import SPEC_UNUSABLE, SpecError
from overnight.core.grants import SETTINGS as GRANT_SETTINGS
from overnight.core.grants import SPEC_REFUSED, refusal_message
from overnight.core.models import RunSpec


def _arguments(start: argparse.ArgumentParser) -> None:
    start.add_argument("spec", nargs="?", help="path to the RunSpec JSON file")
    start.add_argument("--many", metavar="TASKS.jsonl", help="one run a line (docs/many-runs.md)")
    start.add_argument("--wait", action="store_true", help="wait for the run's result")
    start.add_argument(
        "--no-wait",
        action="store_true",
        help="return once the run is started, without waiting (up to 15 s) for the worker "
        "to take it, check its spec and make its first sandbox",
    )
    start.add_argument("--json", action="store_true", help=JSON_HELP)
    start.add_argument("--task-queue", default=TASK_QUEUE, help=TASK_QUEUE_HELP)
    agents_cli.add_start_arguments(start)


async def _start(args: argparse.Namespace) -> int:
    if args.wait and args.no_wait:
        raise BadInput("--wait waits for the run's end, --no-wait for nothing: not both")
    if args.many is not None:
        if args.wait:
            raise BadInput("--wait waits for one run: not with --many")
        return await many_cli.run(args, lambda: connect(args))
    # Before connecting: a bad spec never reaches a server.
    spec = agents_cli.spec_from_args(args) if args.agent else api.load_spec(args.spec)
    if args.agent and args.print_spec:
        print(spec.model_dump_json(indent=2, exclude_defaults=True))
        return OK
    if (problem := too_large(spec)) is not None:
        raise SpecError(problem)
    _warn_if_refused(spec)
    client = await connect(args)
    handle = await api.start_run(client, spec, task_queue=args.task_queue)
    url = ui_url(client, handle.id)
    if not args.json:
        print(f"started {handle.id}" + (f"\nWeb UI: {url}" if url else ""), flush=True)
    if not args.wait:
        if not args.no_wait:
            # The worker's word on it (refused, failed at its first create, needs a person).
            seconds = start_look.wait_seconds()
            found = await start_look.look(
                client, handle.id, task_queue=args.task_queue, seconds=seconds
            )
            if not found.going:
                raise SpecError(found.line) if found.bad_input else api.OvernightError(found.line)
            if not args.json:
                print(found.line)
        if args.json:
            print(render.json_document({"run_id": handle.id, "web_ui": url}))
        return OK
    try:
        result = await api.wait_result(client, handle.id)
    except WorkflowFailureError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type in (
            SPEC_REFUSED,
            "InvalidSpec",
            SPEC_UNUSABLE,
        ):
            # The run's spec, refused at its start or unusable as it met the world (a repo
            # that does not exist, a command not found): the one line says why (exit 2).
            raise SpecError(cause.message) from None
        raise
    if args.json:
        print(render.json_document({"run_id": handle.id, "web_ui": url, "result": result}))
    else:
        print(render.result_text(result))
    return OK


def _warn_if_refused(spec: RunSpec) -> None:
    """Say early what a worker would refuse of `spec` (grants: overnight/core/grants.py): what no
    worker allows, and, when this shell sets the workers' grant settings, what a worker with
    them would not grant. Only a warning: the worker that takes the run decides, by its own."""
    from activities.admission.grants import spec_refusals, worker_grants

    try:
        grants = worker_grants() if any(name in os.environ for name in GRANT_SETTINGS) else None
        found = spec_refusals(spec, grants)
    except ValueError as err:  # a grant here that no worker would start with
        found = [str(err)]
    if found:
        print(
            f"overnight: warning: {refusal_message(found)} (so says this shell's environment; "
            "the worker that takes the run decides by its own)",
            file=sys.stderr,
            flush=True,
        )


COMMANDS = (
    Command(
        "start",
        "start a run from a spec file",
        _arguments,
        _start,
        check=agents_cli.start_problem,
    ),
)
