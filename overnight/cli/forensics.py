"""`overnight logs` and `overnight inspect`: what an agent printed, and what its sandbox holds.

Both read the run's sandboxes from this machine, through the same providers as `overnight
reap` (local sandboxes under `OVERNIGHT_HOME`; Runtime's with `RUNTIME_API_KEY` set here), and
need no worker (see overnight.cli.run_view).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import posixpath
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import Any

from temporalio.client import Client

from activities.providers.forensics import MAX_LISTED_FILES, FileEntry, FileListing
from activities.providers.protocol import SandboxProvider
from activities.providers.registry import open_configured
from overnight.cli import logs, logs_follow, logs_news
from overnight.cli.commands import Command
from overnight.cli.connecting import connect
from overnight.cli.help_texts import JSON_HELP
from overnight.cli.render import terminal_safe
from overnight.cli.run_names import RUN_NAME_HELP
from overnight.cli.run_view import CannotRead, RunView, load_run, opened, query_status
from overnight.cli.terminal_output import RawText, raw_stdout
from overnight.core.agent_text import terminal_line
from overnight.core.errors import OvernightError
from overnight.core.output_tail import redact, redact_credential_shapes, secret_values

Connect = Callable[[argparse.Namespace], Awaitable[Client]]
# The most `inspect PATH` prints of one file.
MAX_FILE_BYTES = 16 * 1024 * 1024
_KIND_WORDS = {"file": "file", "directory": "dir", "symlink": "link", "other": "?"}
RAW_HELP = (
    "the agent's bytes as they are, control characters and all (secrets still redacted), for "
    "a file or a program: refused on a terminal"
)


class BadInput(OvernightError):
    bad_input = True


def _logs_arguments(read: argparse.ArgumentParser) -> None:
    read.add_argument("run_id", help=RUN_NAME_HELP)
    read.add_argument("--attempt", type=int, help="this attempt (default: the latest)")
    read.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="carry on as it writes, across restarts, with what holds the run as it happens "
        "(a question, needs you, a pause), until the run ends and why",
    )
    read.add_argument("--tail", "-n", type=int, metavar="N", help="only the last N lines")
    read.add_argument(
        "--json", action="store_true", help="one JSON document (--follow: one JSON event a line)"
    )
    read.add_argument("--raw", action="store_true", help=RAW_HELP)


def _inspect_arguments(look: argparse.ArgumentParser) -> None:
    look.add_argument("run_id", help=RUN_NAME_HELP)
    look.add_argument(
        "path",
        nargs="?",
        default="/workspace",
        help="a folder to list or a file to print (default /workspace)",
    )
    look.add_argument("--attempt", type=int, help="this attempt's sandbox (default: the latest)")
    look.add_argument("--json", action="store_true", help=JSON_HELP)
    look.add_argument("--raw", action="store_true", help=RAW_HELP)


async def run_logs(args: argparse.Namespace, connect: Connect) -> int:
    if args.attempt is not None and args.attempt < 1:
        raise BadInput("--attempt must be 1 or more")
    if args.tail is not None and args.tail < 1:
        raise BadInput("--tail must be 1 or more")
    raw = _raw_out(args)
    client = await connect(args)
    async with open_configured() as providers:
        view = await load_run(client, args.run_id, _lookup(providers))
        provider = _lookup(providers)(view.spec.provider)
        if args.follow:
            return await _follow(client, view, provider, args, raw)
        attempt = _attempt(view, args.attempt)
        if args.json:
            # The document holds the output as written (secrets redacted), as `--follow
            # --json` does: JSON escapes it, and a reader applies its own page's rule.
            secrets = secret_values(view.spec.secret_env, os.environ)
            printer = logs.Printer(secrets, io.StringIO(), escape=str)
        else:
            printer = logs.printer_for(view, json_lines=False, raw=raw)
        try:
            await logs.show_attempt(view, provider, attempt, printer, tail=args.tail)
        except CannotRead as why:
            return _show_kept(view, attempt, why, json_out=args.json, lines=args.tail)
        if args.json:
            collected = printer.out
            assert isinstance(collected, io.StringIO)
            print(
                json.dumps(
                    {
                        "run_id": view.run_id,
                        "attempt": attempt,
                        "sandbox_id": view.sandboxes[attempt].sandbox_id,
                        "output": collected.getvalue(),
                    },
                    indent=2,
                )
            )
    return 0


async def _follow(
    client: Client,
    view: RunView,
    provider: SandboxProvider,
    args: argparse.Namespace,
    raw: logs.Out | None,
) -> int:
    printer = logs.printer_for(view, json_lines=args.json, raw=raw)
    start = args.attempt or view.latest() or 1

    async def reload() -> None:
        view.status = await query_status(client, view.run_id) or view.status

    if args.tail is not None and start in view.sandboxes:
        printer.event("attempt", logs.attempt_header(view, start), attempt=start)
        try:
            await logs.show_attempt(view, provider, start, printer, tail=args.tail)
        except CannotRead as why:
            logs.say(str(why))
        # Then on from the end of what was shown: the agent's new lines, and later attempts.
    # The run's own news (needs you, a question, a pause) between its agent's lines.
    reads = logs_follow.Reads()
    news = asyncio.create_task(logs_news.watch(client, view, printer, reads))
    try:
        ended, reason = await logs_follow.follow(
            client, view, provider, start, printer, reload, reads
        )
    finally:
        news.cancel()
    told = f"{ended}: {reason}" if reason else ended
    line = terminal_line(f"=== run {view.run_id} ended: {told} ===")
    printer.event("end", line, state=ended, reason=reason)
    return 0


def _show_kept(
    view: RunView,
    attempt: int,
    why: CannotRead,
    *,
    json_out: bool,
    lines: int | None = None,
) -> int:
    tail = view.kept_tail(attempt)
    logs.say(str(why))
    if tail is None:
        if view.status is None:
            logs.say(f"its last words are in overnight status {view.run_id} once a worker answers")
        return 1
    logs.say(
        f"its last words, as the run kept them (attempt {attempt}; also in "
        f"overnight status {view.run_id}):"
    )
    if lines is not None:
        tail = "\n".join(tail.splitlines()[-lines:])
    if json_out:
        about = {"run_id": view.run_id, "attempt": attempt, "why_not": str(why)}
        print(json.dumps({**about, "kept_tail": tail}))
    else:
        print(terminal_safe(tail))
    return 0


async def run_inspect(args: argparse.Namespace, connect: Connect) -> int:
    path = _workspace_path(args.path)
    raw = _raw_out(args)
    client = await connect(args)
    async with open_configured() as providers:
        view = await load_run(client, args.run_id, _lookup(providers))
        provider = _lookup(providers)(view.spec.provider)
        attempt = _attempt(view, args.attempt)
        secrets = secret_values(view.spec.secret_env, os.environ)
        async with opened(view, provider, attempt, logs.say) as box:
            sid = box.sandbox.sandbox_id
            about = {
                "run_id": view.run_id,
                "attempt": attempt,
                "sandbox_id": sid,
                "sandbox_state": "paused" if box.woken else box.sandbox.state,
                "woken": box.woken,
                "path": path,
            }
            listing = await box.forensics.list_files(sid, path, MAX_LISTED_FILES)
            if listing.is_dir:
                if raw is not None:
                    raise BadInput(f"{path} is a folder: --raw prints a file")
                _print_listing(about, listing, json_out=args.json)
                return 0
            read = await box.forensics.read_file(sid, path, MAX_FILE_BYTES)
    if read.status == "too_large":
        raise OvernightError(f"{path} is {read.size} bytes: more than inspect prints (16 MiB)")
    if read.status == "outside":
        raise BadInput(f"{path} leads outside /workspace (through a symlink): inspect stays inside")
    if read.status == "refused":
        raise BadInput(terminal_safe(f"{path} is not read: {read.detail}"))
    if read.status != "ok" or read.data is None:
        raise BadInput(f"no file or folder {path} in sandbox {sid} (attempt {attempt})")
    _print_file(about, read.data, secrets, json_out=args.json, raw=raw is not None)
    return 0


def _raw_out(args: argparse.Namespace) -> logs.Out | None:
    """Where `--raw` writes (None: not asked): refused on a terminal and beside `--json`,
    before anything is read."""
    if not args.raw:
        return None
    if args.json:
        raise BadInput("--raw writes the agent's bytes, --json a document: not both")
    return RawText()


def _print_listing(about: dict[str, Any], listing: FileListing, *, json_out: bool) -> None:
    if json_out:
        entries = [
            {
                "path": e.path,
                "type": e.kind,
                "size": e.size,
                "modified_at": e.modified_at.isoformat() if e.modified_at else None,
            }
            for e in listing.entries
        ]
        print(json.dumps({**about, "entries": entries, "more": listing.more}, indent=2))
        return
    state = about["sandbox_state"] + (", woken for this look" if about["woken"] else "")
    print(
        f"sandbox {about['sandbox_id']} (attempt {about['attempt']}, {state}): "
        f"{terminal_safe(about['path'])}, {len(listing.entries) + listing.more} entries"
    )
    for entry in listing.entries:
        # File names are the agent's: one named "\x1b[2J" is shown, not obeyed.
        print(terminal_safe(_entry_line(entry)))
    if listing.more:
        print(f"... and {listing.more} more")


def _entry_line(entry: FileEntry) -> str:
    when = entry.modified_at.astimezone(UTC) if entry.modified_at else None
    stamp = f"{when:%Y-%m-%d %H:%M:%S}" if when else "-"
    size = _size(entry.size) if entry.kind == "file" else "-"
    suffix = "/" if entry.kind == "directory" else ""
    return f"  {_KIND_WORDS[entry.kind]:<4} {size:>9}  {stamp}  {entry.path}{suffix}"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


def _print_file(
    about: dict[str, Any], data: bytes, secrets: list[str], *, json_out: bool, raw: bool = False
) -> None:
    """The file for a person, on a terminal or in a pipe alike: its control characters (and
    bytes that are not UTF-8) escaped, so the agent's bytes cannot drive a terminal; with
    `raw`, as it is (a text file with the run's secrets redacted) for a program."""
    try:
        # A file may hold the gateway's tokens (.git/config's remote URL): redacted by shape.
        text: str | None = redact_credential_shapes(redact(data.decode("utf-8"), secrets))
    except UnicodeDecodeError:
        text = None
    if json_out:
        content = (
            {"text": text} if text is not None else {"base64": base64.b64encode(data).decode()}
        )
        print(json.dumps({**about, "size": len(data), **content}, indent=2))
    elif raw:
        out = raw_stdout()
        out.write(text.encode() if text is not None else data)
        out.flush()
    else:
        readable = text if text is not None else data.decode("utf-8", errors="backslashreplace")
        sys.stdout.write(terminal_safe(redact_credential_shapes(redact(readable, secrets))))
        sys.stdout.flush()


def _workspace_path(raw: str) -> str:
    path = raw if raw.startswith("/") else posixpath.join("/workspace", raw)
    normal = posixpath.normpath(path)
    if normal != "/workspace" and not normal.startswith("/workspace/"):
        raise BadInput(f"{raw}: inspect looks under /workspace only")
    return normal


def _attempt(view: RunView, wanted: int | None) -> int:
    never_ran = _failed_before_its_agent_ran(view)
    if never_ran is not None:
        raise OvernightError(never_ran)
    # Attempts whose sandboxes are deleted and their records gone are still the run's.
    known = view.status.attempt if view.status is not None else 0
    latest = view.latest() or known or None
    if latest is None:
        raise OvernightError(f"run {view.run_id} has no sandbox yet")
    if wanted is None:
        return latest
    if wanted not in view.sandboxes and not 1 <= wanted <= known:
        have = ", ".join(map(str, view.attempts))
        raise BadInput(f"run {view.run_id} has no attempt {wanted} (attempts: {have})")
    return wanted


def _failed_before_its_agent_ran(view: RunView) -> str | None:
    """The line for a run that failed at its first create (a spec the worker refused, a
    missing agent_dir): it has no sandbox to read, and "no sandbox yet" or "deleted" would
    send a person looking for one. None for any other run."""
    status = view.status
    if status is None or not status.failure or view.sandboxes or status.attempt > 1:
        return None
    return f"run {view.run_id} failed before its agent ran, so it has no output: {status.failure}"


def _lookup(providers: dict[str, SandboxProvider]) -> Callable[[str], SandboxProvider]:
    def lookup(name: str) -> SandboxProvider:
        found = providers.get(name)
        if found is None:
            raise OvernightError(
                f"this run's sandboxes are on provider {name!r}: set RUNTIME_API_KEY here to "
                "read them"
            )
        return found

    return lookup


COMMANDS = (
    Command(
        "logs",
        "what the agent printed (stdout and stderr)",
        _logs_arguments,
        lambda args: run_logs(args, connect),
    ),
    Command(
        "inspect",
        "list a sandbox's /workspace, or print a file",
        _inspect_arguments,
        lambda args: run_inspect(args, connect),
    ),
)
