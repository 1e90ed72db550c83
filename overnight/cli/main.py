"""`overnight`: start, watch, steer and clean up agent runs. A thin layer over overnight.cli.client.

Exit codes: 0 ok, 2 bad input (one line saying why), 1 anything else (one line, or the
traceback with --debug).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import NoReturn

from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from overnight.cli import agents as agents_cli
from overnight.cli import client as api
from overnight.cli import codec_server as codec_cli
from overnight.cli import console as console_cli
from overnight.cli import dev_commands as dev_cli
from overnight.cli import disk as disk_cli
from overnight.cli import forensics as forensics_cli
from overnight.cli import many as many_cli
from overnight.cli import render, start_look
from overnight.cli import replay_check as replay_check_cli
from overnight.cli import report as report_cli
from overnight.cli import schedule as schedule_cli
from overnight.cli import workspace as workspace_cli
from overnight.cli.error_text import one_line
from overnight.cli.help_texts import JSON_HELP, TASK_QUEUE_HELP, describe_every_command
from overnight.cli.retrying import retrying_lines, with_waiting_on
from overnight.cli.run_names import RUN_NAME_HELP
from overnight.cli.spec_size import too_large
from overnight.cli.terminal_output import guarded
from overnight.connect import UI_URL_ENV
from overnight.constants import TASK_QUEUE
from overnight.errors import SPEC_UNUSABLE, OvernightError, SpecError
from overnight.grants import SETTINGS as GRANT_SETTINGS
from overnight.grants import SPEC_REFUSED, refusal_message
from overnight.models import BudgetExtension, RunSpec

OK, FAILED, BAD_INPUT = 0, 1, 2
# overnight's own options, before any command.
GLOBAL_OPTIONS = ("--address", "--namespace", "--debug")


class BadInput(OvernightError):
    bad_input = True


class _Parser(argparse.ArgumentParser):
    _intermixing = False

    def error(self, message: str) -> NoReturn:
        # One line instead of argparse's usage block.
        if message.startswith("unrecognized arguments"):
            misplaced = [o for o in GLOBAL_OPTIONS if o in message.split()]
            if misplaced:  # `overnight list --address X`: argparse takes them first only
                self.exit(
                    BAD_INPUT,
                    f"overnight: {', '.join(misplaced)} {'goes' if len(misplaced) == 1 else 'go'} "
                    "before the command: "
                    f"overnight {misplaced[0]} ... COMMAND ...\n",
                )
        self.exit(BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Options and arguments in any order (`inspect RUN --attempt 1 PATH` as well as
        `inspect --attempt 1 RUN PATH`), where argparse allows it: not in a parser of commands."""
        commands = any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in self._actions)
        if commands or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # its own two passes come back here
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="overnight",
        description="Keep an AI agent's long run going.",
        epilog="overnight COMMAND --help says what a command takes.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--address", help="Temporal host:port (default: env config)")
    parser.add_argument("--namespace", help="Temporal namespace (default: env config)")
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, title="commands", metavar="COMMAND"
    )

    start = commands.add_parser("start", help="start a run from a spec file")
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

    status = commands.add_parser("status", help="show one run")
    status.add_argument("run_id", help=RUN_NAME_HELP)
    status.add_argument("--json", action="store_true", help=JSON_HELP)

    listing = commands.add_parser("list", help="list runs")
    listing.add_argument("--open", action="store_true", help="only runs still going")
    listing.add_argument("--json", action="store_true", help=JSON_HELP)

    cancel = commands.add_parser("cancel", help="cancel a run")
    cancel.add_argument("run_id", help=RUN_NAME_HELP)
    cancel.add_argument(
        "--reason", help="why (in the run's history and its `cancelled` notification)"
    )

    extend = commands.add_parser(
        "extend",
        help="add to a run's budget",
        description="Add to a run's budget; a run that needs attention for its budget goes on.",
    )
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

    push = commands.add_parser(
        "push",
        help="try a run's push (or its pull request) again now",
        description=(
            "Try again now what a run waits on to deliver its work: the push of its branch "
            "(or of a kept workspace) the origin refused, its pull request, or a look at its "
            "CI; what `extend` does for them, without adding to the budget. Refused when the "
            "run waits on none of them."
        ),
    )
    push.add_argument("run_id", help=RUN_NAME_HELP)

    answer = commands.add_parser("answer", help="answer the question a run's agent asks")
    answer.add_argument("run_id", help=RUN_NAME_HELP)
    answer.add_argument("text", help="the answer (one of the question's choices, if it has any)")

    reap = commands.add_parser(
        "reap",
        help="delete sandboxes no run needs (closed runs', past retention); says the disk freed",
    )
    reap.add_argument(
        "--paused", action="store_true", help="every paused one of a closed run too, kept or not"
    )
    reap.add_argument("--json", action="store_true", help=JSON_HELP)
    disk_cli.add_parser(commands, _Parser)
    report_cli.add_parser(commands, _Parser)

    forensics_cli.add_parsers(commands, _Parser)
    schedule_cli.add_parser(commands, _Parser)
    replay_check_cli.add_parser(commands, _Parser)

    codec_cli.add_parser(commands, _Parser)
    console_cli.add_parser(commands, _Parser)
    agents_cli.add_parser(commands, _Parser)
    workspace_cli.add_parsers(commands, _Parser)

    dev_cli.add_parsers(commands, _Parser)
    describe_every_command(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code. As the console script (`argv` None) it
    exits the process itself, skipping interpreter teardown: the Temporal client's native
    threads can abort a finalizing interpreter (temporalio/sdk-python#300), which would turn
    a clean exit code into a crash."""
    code = run(argv)
    if argv is None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # `overnight list | head`: the reader has all it wanted
            pass
        sys.stderr.flush()
        os._exit(code)
    return code


def run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "start" and (problem := agents_cli.start_problem(args)) is not None:
        parser.error(problem)
    # Whatever a command writes, on stdout or stderr, an agent may have written part of it:
    # all of it goes through one rule (overnight/cli/terminal_output.py).
    document = getattr(args, "json", False) or getattr(args, "print_spec", False)
    with guarded(json_out=bool(document)):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_dispatch(args))
    except KeyboardInterrupt:
        return FAILED
    except BrokenPipeError:
        # The reader of our output went away (`| head`): nothing is wrong, nothing more to say.
        # Later writes to the closed pipe go nowhere instead of failing again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        bad = getattr(err, "bad_input", False)
        print(f"overnight: {one_line(err)}", file=sys.stderr)
        return BAD_INPUT if bad else FAILED


async def _dispatch(args: argparse.Namespace) -> int:
    handlers: dict[str, Callable[[argparse.Namespace], Awaitable[int]]] = {
        "start": _start,
        "status": _status,
        "list": _list,
        "cancel": _cancel,
        "extend": _extend,
        "push": _push,
        "answer": _answer,
        "reap": _reap,
        "disk": disk_cli.run,
        "report": lambda a: report_cli.run(a, _connect),
        "schedule": _schedule,
        "replay-check": _replay_check,
        "logs": _logs,
        "inspect": _inspect,
        "codec-server": codec_cli.run,
        "console": lambda a: console_cli.run(a, lambda: _connect(a)),
        "dev": dev_cli.run_dev,
        "demo": dev_cli.run_demo,
        "agents": agents_cli.run,
        "diff": lambda a: workspace_cli.run_diff(a, _connect),
        "rewind": lambda a: workspace_cli.run_rewind(a, _connect),
    }
    return await handlers[args.command](args)


async def _connect(args: argparse.Namespace) -> Client:
    from overnight.connect import connect

    return await connect(args.address, args.namespace)


def _ui_url(client: Client, run_id: str) -> str | None:
    address = client.service_client.config.target_host
    base = api.default_ui_base(address, os.environ.get(UI_URL_ENV) or _dev_ui_for(address))
    return api.web_ui_url(base, client.namespace, run_id) if base else None


def _dev_ui_for(address: str) -> str | None:
    """The Web UI of the dev server in temporal-dev.yaml, when that is where we are connected."""
    from overnight.worker.devconfig import DevConfigError, default_dev_config

    try:
        config = default_dev_config()
    except DevConfigError:
        return None
    same = address.rsplit(":", 1)[-1] == str(config.port)
    return config.ui_url if same and config.ui else None


def _now() -> datetime:
    return datetime.now(UTC)


async def _start(args: argparse.Namespace) -> int:
    if args.wait and args.no_wait:
        raise BadInput("--wait waits for the run's end, --no-wait for nothing: not both")
    if args.many is not None:
        if args.wait:
            raise BadInput("--wait waits for one run: not with --many")
        return await many_cli.run(args, lambda: _connect(args))
    # Before connecting: a bad spec never reaches a server.
    spec = agents_cli.spec_from_args(args) if args.agent else api.load_spec(args.spec)
    if args.agent and args.print_spec:
        print(spec.model_dump_json(indent=2, exclude_defaults=True))
        return OK
    if (problem := too_large(spec)) is not None:
        raise SpecError(problem)
    _warn_if_refused(spec)
    client = await _connect(args)
    handle = await api.start_run(client, spec, task_queue=args.task_queue)
    url = _ui_url(client, handle.id)
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
    """Say early what a worker would refuse of `spec` (grants: overnight/grants.py): what no
    worker allows, and, when this shell sets the workers' grant settings, what a worker with
    them would not grant. Only a warning: the worker that takes the run decides, by its own."""
    from activities.grants import spec_refusals, worker_grants

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


async def _status(args: argparse.Namespace) -> int:
    client = await _connect(args)
    workflow_id = await api.workflow_id_of(client, args.run_id)
    status = await api.get_status(client, workflow_id)
    if args.json:
        print(render.json_document(status))
    else:
        print(render.status_text(status, now=_now(), ui_url=_ui_url(client, workflow_id)))
        # What it waits on meanwhile (a create retried while the worker is low on disk).
        for line in await retrying_lines(client, workflow_id, _now()):
            print(line)
    return OK


async def _list(args: argparse.Namespace) -> int:
    client = await _connect(args)
    runs = await api.list_runs(client, open_only=args.open)
    runs = await with_waiting_on(client, runs, _now())
    print(render.json_document(runs) if args.json else render.runs_text(runs, now=_now()))
    return OK


async def _cancel(args: argparse.Namespace) -> int:
    client = await _connect(args)
    await api.cancel_run(client, await api.workflow_id_of(client, args.run_id), args.reason)
    print(f"asked {args.run_id} to cancel")
    return OK


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
    client = await _connect(args)
    await api.extend_budget(client, await api.workflow_id_of(client, args.run_id), extension)
    print(f"asked {args.run_id} to extend its budget by {render.extension_text(extension)}")
    return OK


async def _push(args: argparse.Namespace) -> int:
    client = await _connect(args)
    said = await api.push_again(client, await api.workflow_id_of(client, args.run_id))
    print(f"{args.run_id}: {said}")
    return OK


async def _answer(args: argparse.Namespace) -> int:
    client = await _connect(args)
    said = await api.answer_question(
        client, await api.workflow_id_of(client, args.run_id), args.text
    )
    print(f"{args.run_id}: {said}")
    return OK


async def _reap(args: argparse.Namespace) -> int:
    from activities.providers.registry import open_configured
    from overnight.errors import ServerUnreachable
    from overnight.worker.reaping import reap_here

    try:
        client = await _connect(args)
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


REAP_HERE_ONLY = (
    "reaped what this host holds alone (finished half-done deletes, and the local sandboxes "
    "kept after their run ended: deleted past their keep-until, else let go of their host "
    "processes); closed runs' other sandboxes, snapshots, session stores and kept "
    "workspaces' refs wait for a reap with the server"
)


async def _logs(args: argparse.Namespace) -> int:
    return await forensics_cli.run_logs(args, _connect)


async def _inspect(args: argparse.Namespace) -> int:
    return await forensics_cli.run_inspect(args, _connect)


async def _schedule(args: argparse.Namespace) -> int:
    return await schedule_cli.run(args, _connect)


async def _replay_check(args: argparse.Namespace) -> int:
    return await replay_check_cli.run(args, _connect)
