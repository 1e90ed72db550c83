"""`overnight schedule create|list|describe|pause|unpause|trigger|delete`: runs on Temporal
Schedules (see overnight.cli.schedules)."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from temporalio.client import Client

from overnight.cli import render, schedules
from overnight.cli.commands import Command
from overnight.cli.connecting import connect
from overnight.cli.help_texts import JSON_HELP, TASK_QUEUE_HELP
from overnight.core.constants import TASK_QUEUE
from overnight.core.specs import load_spec

Connect = Callable[[argparse.Namespace], Awaitable[Client]]


NAME_HELP = "the schedule's name (its id in Temporal)"


def _arguments(schedule: argparse.ArgumentParser) -> None:
    # Its verbs parse as the command does (one line on a misuse, options in any order).
    verbs = schedule.add_subparsers(dest="verb", required=True, parser_class=type(schedule))
    create = verbs.add_parser("create", help="create a schedule that starts a run of SPEC")
    create.add_argument("name", help=NAME_HELP)
    create.add_argument("spec", help="path to the RunSpec JSON file (without run_id)")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help='a cron line, e.g. "0 1 * * *" (01:00 every night)')
    when.add_argument("--every", help="an interval: 30m, 6h, 1d")
    create.add_argument(
        "--overlap",
        choices=sorted(schedules.OVERLAPS),
        default="skip",
        help="when a firing finds the last run still going: skip it (default), start it after "
        "(buffer-one), or cancel the other",
    )
    create.add_argument("--timezone", help="IANA name, e.g. Europe/Berlin (default UTC)")
    create.add_argument("--task-queue", default=TASK_QUEUE, help=TASK_QUEUE_HELP)
    create.add_argument("--json", action="store_true", help=JSON_HELP)
    listing = verbs.add_parser("list", help="list schedules")
    listing.add_argument("--json", action="store_true", help=JSON_HELP)
    for verb, about in (
        ("describe", "show one schedule: when, overlap, next and recent runs, skips"),
        ("pause", "stop firing until unpaused"),
        ("unpause", "fire again"),
        ("trigger", "fire now (under the schedule's overlap policy)"),
        ("delete", "delete the schedule; runs it started go on"),
    ):
        one = verbs.add_parser(verb, help=about)
        one.add_argument("name", help=NAME_HELP)
        one.add_argument("--json", action="store_true", help=JSON_HELP)
        if verb in ("pause", "unpause"):
            one.add_argument("--note", help="why, shown in the schedule's description")


async def run(args: argparse.Namespace, connect: Connect) -> int:
    if args.verb == "create":
        spec = schedules.scheduled_spec(load_spec(args.spec))  # before connecting
        when = schedules.When(
            cron=args.cron, every=None if args.cron else schedules.parse_every(args.every)
        )
        client = await connect(args)
        await schedules.create_schedule(
            client,
            args.name,
            spec,
            when,
            overlap=args.overlap,
            timezone=args.timezone,
            task_queue=args.task_queue,
        )
        return _show(args, await schedules.describe_schedule(client, args.name), "created")
    client = await connect(args)
    if args.verb == "list":
        found = await schedules.list_schedules(client)
        print(render.json_document(found) if args.json else _list_text(found))
        return 0
    if args.verb in ("pause", "unpause"):
        paused = args.verb == "pause"
        await schedules.pause_schedule(client, args.name, paused=paused, note=args.note)
    elif args.verb == "trigger":
        await schedules.trigger_schedule(client, args.name)
    elif args.verb == "delete":
        await schedules.delete_schedule(client, args.name)
        print(render.json_document({"deleted": args.name}) if args.json else f"deleted {args.name}")
        return 0
    done = {"pause": "paused", "unpause": "unpaused", "trigger": "triggered"}.get(args.verb, "")
    return _show(args, await schedules.describe_schedule(client, args.name), done)


def _show(args: argparse.Namespace, info: schedules.ScheduleInfo, done: str) -> int:
    if args.json:
        print(render.json_document(info))
    else:
        if done:
            print(f"{done} {info.name}")
        print(describe_text(info))
    return 0


def describe_text(info: schedules.ScheduleInfo) -> str:
    tz = f" ({info.timezone})" if info.timezone else " (UTC)"
    lines = [
        f"schedule {info.name}: {info.when}{tz}, overlap {info.overlap}"
        + (" - PAUSED" if info.paused else ""),
        f"  fired {info.fired} times; skipped {info.skipped_for_overlap} because a run was "
        "still going",
    ]
    if info.running:
        lines.append(f"  running now: {', '.join(info.running)}")
    if info.next_runs:
        lines.append("  next: " + ", ".join(_time(t) for t in info.next_runs))
    if info.recent_runs:
        lines.append("  recent: " + ", ".join(info.recent_runs))
    if info.note:
        lines.append(f"  note: {info.note}")
    return "\n".join(lines)


def _list_text(found: list[schedules.ScheduleInfo]) -> str:
    if not found:
        return "no schedules"
    return "\n".join(
        f"{s.name:<24} {s.when:<20} overlap {s.overlap:<12} "
        f"{'paused' if s.paused else 'active'}  running {len(s.running)}"
        for s in found
    )


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


COMMANDS = (
    Command(
        "schedule",
        "runs on a Temporal Schedule (nightly...)",
        _arguments,
        lambda args: run(args, connect),
    ),
)
