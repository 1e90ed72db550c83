"""What the `overnight` command prints of an agent's bytes cannot drive the operator's terminal
(escape sequences are shown, not obeyed), in a pipe as on a terminal, and shows no part of a
secret, wherever the output was cut. Issue #47, item 3: every command fed one hostile agent's
bytes (a real run: the dev server, an in-process worker, a local sandbox, the real command in
its own process, in a pipe and on a pseudo-terminal); `--raw` the only way to the bytes, and
never onto a terminal. Real local sandboxes and agents for `logs`."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.providers.forensics import FileEntry, FileListing
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch
from overnight.cli import client as api
from overnight.cli import forensics as inspect_cli
from overnight.cli import logs
from overnight.cli.render import result_text, status_text, terminal_safe
from overnight.cli.run_view import RunView
from overnight.cli.terminal_output import RAW_ON_A_TERMINAL, guarded
from overnight.core.agent_requests import RunOutputs
from overnight.core.agent_text import terminal_line
from overnight.core.models import (
    Budget,
    CheckpointSummary,
    LastWords,
    RunResult,
    RunSpec,
    RunStatus,
)
from overnight.worker.devserver import DevServer
from tests.e2e.helpers import wait_for_status
from tests.live import in_process_worker, new_run_id, nothing_left_running, scripted_spec
from tests.providers.test_behaviour import request
from tests.waits import CAP

PWNED = "\x1b]0;pwned\x07\x1b[2J"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J"
SECRET = "sk-live-" + "0123456789abcdef" * 128  # 2 KiB, longer than the 1 KiB margin
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    try:
        yield provider
    finally:
        for info in await provider.list({}, include_stopped=False):
            await provider.stop(info.sandbox_id)


async def agent_printed(provider: LocalProvider, command: str, **env: str) -> RunView:
    """A run whose one attempt's agent ran `command` (and ended)."""
    info, _ = await provider.get_or_create(request(f"tty-{uuid.uuid4().hex[:10]}"))
    agent = await provider.start_agent(
        info.sandbox_id,
        AgentLaunch(start_key="tty-1-0", command=command, cwd="/workspace", env=env),
    )
    give_up = time.monotonic() + CAP  # a time cap, not a count of looks: load slows the agent
    while time.monotonic() < give_up:
        if (await provider.process(info.sandbox_id, agent.process_id)).state != "running":
            break
        await asyncio.sleep(0.05)
    spec = RunSpec(run_id="tty", repo="/tmp/r", agent_dir="/tmp/a", command=command)
    return RunView(run_id="tty", spec=spec, open=False, status=None, sandboxes={1: info})


async def shown_logs(provider: LocalProvider, view: RunView, *, tail: int | None = None) -> str:
    out = io.StringIO()
    printer = logs.Printer([SECRET], out)
    await logs.show_attempt(view, provider, 1, printer, tail=tail)
    return out.getvalue()


def no_piece_of(secret: str, text: str, size: int = 8) -> bool:
    return not any(secret[i : i + size] in text for i in range(len(secret) - size + 1))


# ----- terminal control characters -----


async def test_logs_show_an_agents_escape_sequences_instead_of_obeying_them(
    local: LocalProvider,
) -> None:
    view = await agent_printed(local, "printf 'hello \\033]0;pwned\\007\\033[2J world\\r\\n'")
    shown = await shown_logs(local, view)
    assert shown == f"hello {SHOWN} world\r\n"
    assert "\x1b" not in shown and "\x07" not in shown


def test_terminal_safe_keeps_newlines_and_tabs_and_escapes_every_other_control() -> None:
    text = "a\tb\r\nc\rd\x08e\x9b2Jf\u202eg\x7f\x00"
    assert terminal_safe(text) == "a\tb\r\nc\\x0dd\\x08e\\x9b2Jf\\u202eg\\x7f\\x00"


def test_status_shows_an_agents_escape_sequences_instead_of_obeying_them() -> None:
    status = RunStatus(
        run_id="tty",
        state="running",
        attempt=1,
        budget=Budget(),
        started_at=NOW,
        checkpoint_summary=CheckpointSummary(next=f"step {PWNED}", last_note=PWNED),
        last_words=LastWords(attempt=1, reason="agent crashed", at=NOW, tail=f"boom {PWNED}"),
    )
    text = status_text(status, now=NOW, ui_url=None)
    assert "\x1b" not in text and "\x07" not in text
    assert f"step {SHOWN}" in text and f"boom {SHOWN}" in text


def test_status_keeps_agent_text_on_its_line_so_it_forges_no_label() -> None:
    """Issue #30, item 5: a newline in the next step, a note or an output printed a line of
    its own, one that reads as overnight's (`question:`, `needs you:`)."""
    forged = (
        "done\n  question:      Approve production deploy? (one of: yes, no)\u2028  needs you: x"
    )
    status = RunStatus(
        run_id="tty",
        state="finished",
        attempt=1,
        budget=Budget(),
        started_at=NOW,
        checkpoint_summary=CheckpointSummary(next=forged, last_note=forged),
        outputs=RunOutputs(summary=forged, values={"pr": forged}),
    )
    lines = status_text(status, now=NOW, ui_url=None).splitlines()
    holding = [line.split(":", 1)[0].strip() for line in lines if "Approve production" in line]
    assert holding == ["step", "last note", "result", "output pr"]  # one line each, its own
    assert not any(line.lstrip().startswith(("question:", "needs you:")) for line in lines)


def test_inspect_escapes_a_file_and_copies_it_exactly_only_when_asked_raw(
    capsys: pytest.CaptureFixture[str],
) -> None:
    about: dict[str, Any] = {"path": "/workspace/notes.txt"}
    data = f"notes {PWNED}\n".encode()
    inspect_cli._print_file(about, data, [], json_out=False)
    assert capsys.readouterr().out == f"notes {SHOWN}\n"
    inspect_cli._print_file(about, b"\x1b[2J\xff\xfe", [], json_out=False)
    assert capsys.readouterr().out == "\\x1b[2J\\xff\\xfe"
    inspect_cli._print_file(about, data, [], json_out=False, raw=True)  # into a pipe here
    assert capsys.readouterr().out == f"notes {PWNED}\n"


def test_inspect_shows_file_names_with_escape_sequences_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    about = {
        "sandbox_id": "box",
        "attempt": 1,
        "sandbox_state": "running",
        "woken": False,
        "path": "/workspace",
    }
    listing = FileListing(
        entries=[FileEntry(path=f"/workspace/{PWNED}", kind="file", size=1, modified_at=NOW)]
    )
    inspect_cli._print_listing(about, listing, json_out=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and f"/workspace/{SHOWN}" in out


# ----- secrets wherever the output is cut -----


async def test_logs_show_no_part_of_a_secret_the_agent_was_cut_off_printing(
    local: LocalProvider,
) -> None:
    view = await agent_printed(local, 'printf "done\\ntoken=%s" "${TOKEN:0:12}"', TOKEN=SECRET)
    shown = await shown_logs(local, view)
    assert shown == "done\ntoken=***\n"


async def test_logs_tail_shows_no_part_of_a_long_secret_its_read_began_inside(
    local: LocalProvider,
) -> None:
    # One long line, no newline yet: the last 64 KiB `--tail` reads begin 999 bytes before
    # the secret's end.
    after = 64 * 1024 - 999
    view = await agent_printed(
        local,
        f'printf "%s%s%s" "$(head -c 10000 /dev/zero | tr "\\0" A)" "$TOKEN" '
        f'"$(head -c {after} /dev/zero | tr "\\0" B)"',
        TOKEN=SECRET,
    )
    shown = await shown_logs(local, view, tail=1)
    assert shown.endswith("B" * 100 + "\n")
    assert no_piece_of(SECRET, shown), shown[:80]


# ----- one rule for everything a command writes -----

# What no byte of a command's output may be, unescaped: C0 controls but tab and newline (and a
# carriage return before a newline), DEL, C1, bidirectional controls, zero-width characters.
UNSHOWN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u2069\ufeff]|\r(?!\n)"
)
# The hostile agent's bytes (tests/agents/terminal) and how every command must show them.
HOSTILE = (
    "\x1b]0;pwned\x07\x1b[2J\x1b[H\x1b[1;31mALL TESTS PASSED, SAFE TO MERGE\x1b[0m"
    "\x9b2J\u202egnp.exe\u200b\rover\x07"
)
HOSTILE_SHOWN = terminal_safe(HOSTILE)
TERMINAL_AGENT = Path(__file__).resolve().parents[1] / "agents" / "terminal"
OVERNIGHT = Path(sys.executable).parent / "overnight"


def unshown_in(data: bytes) -> list[str]:
    """The characters of `data` a terminal would obey rather than show (and any byte that is
    not UTF-8: a terminal in an 8-bit mode reads a lone 0x9b as CSI)."""
    text = data.decode("utf-8")  # raises on a byte that is not UTF-8
    return [repr(found.group()) for found in UNSHOWN.finditer(text)]


def test_every_write_of_a_command_goes_through_the_rule() -> None:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", out)
        patch.setattr(sys, "stderr", err)
        with guarded():
            print(f"agent says {HOSTILE}")
            print(f"overnight: {HOSTILE}", file=sys.stderr)
            sys.stdout.write("a line ending\r")  # a CR at a write's end, a newline next
            sys.stdout.write("\nlast\r")  # and one that no newline follows
        assert sys.stdout is out and sys.stderr is err  # put back
    assert out.getvalue() == f"agent says {HOSTILE_SHOWN}\na line ending\r\nlast\\x0d"
    assert err.getvalue() == f"overnight: {HOSTILE_SHOWN}\n"


def test_a_json_document_keeps_its_values_and_loses_its_controls() -> None:
    out = io.StringIO()
    document = {"text": HOSTILE, "name": "\u202e\x7f\x9b\u061c\ufeff", "n": 1}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", out)
        with guarded(json_out=True):
            print(json.dumps(document, indent=2, ensure_ascii=False))
    assert unshown_in(out.getvalue().encode()) == []
    assert json.loads(out.getvalue()) == document


def test_a_result_keeps_each_of_the_agents_words_on_its_line() -> None:
    """`overnight start --wait` prints the result: the agent's summary and outputs stay on
    their lines (as in `status`), escaped."""
    result = RunResult.model_validate(
        {
            "run_id": "tty",
            "outcome": "finished",
            "attempts": 1,
            "restarts": 0,
            "hours_used": 0.1,
            "spend_usd": 0,
            "outputs": {"summary": f"done\nsafety net: {HOSTILE}", "values": {"pr": HOSTILE}},
        }
    )
    lines = result_text(result).splitlines()
    assert lines[1:] == [
        f"  result: done safety net: {terminal_line(HOSTILE)}",
        f"  output pr: {terminal_line(HOSTILE)}",
    ]


def in_a_terminal(*args: str, env: dict[str, str] | None = None) -> tuple[int, bytes]:
    """The real command with a pseudo-terminal for its stdin, stdout and stderr: its exit code
    and what the terminal received."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [str(OVERNIGHT), *args],
            stdin=follower,
            stdout=follower,
            stderr=follower,
            env={**os.environ, **(env or {})},
            close_fds=True,
        )
    finally:
        os.close(follower)
    received = bytearray()
    try:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every holder of the follower closed it
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(leader)
    return process.wait(timeout=120), bytes(received)


@pytest.mark.parametrize(
    "command",
    [
        ["diff", "some-run", "--raw"],
        ["inspect", "some-run", "notes.md", "--raw"],
        ["logs", "some-run", "--raw"],
    ],
)
def test_raw_is_refused_on_a_terminal_before_anything_is_read(command: list[str]) -> None:
    """`--raw` writes the agent's bytes as they are: onto a terminal that is the attack itself,
    so it is refused there (exit 2), before the command connects anywhere."""
    code, shown = in_a_terminal("--address", "127.0.0.1:9", *command)
    assert code == 2, shown
    assert shown.decode().replace("\r\n", " ").split() == f"overnight: {RAW_ON_A_TERMINAL}".split()


# ----- every command, fed one hostile agent -----


@dataclass(frozen=True)
class Shown:
    """What one command printed, in a pipe or on a terminal."""

    command: str
    code: int
    out: bytes
    err: bytes = b""

    def text(self) -> str:
        return (self.out + self.err).decode("utf-8")


async def in_a_pipe(server: DevServer, *args: str) -> Shown:
    done = await asyncio.to_thread(
        subprocess.run,
        [str(OVERNIGHT), "--address", server.address, *args],
        capture_output=True,
        timeout=120,
        env=dict(os.environ),
    )
    return Shown(" ".join(args), done.returncode, done.stdout, done.stderr)


async def on_a_terminal(server: DevServer, *args: str) -> Shown:
    code, received = await asyncio.to_thread(
        in_a_terminal, "--address", server.address, *args, env={"COLUMNS": "200"}
    )
    return Shown(f"{' '.join(args)} (terminal)", code, received)


def hostile_spec(root: Path, run_id: str) -> RunSpec:
    spec = scripted_spec(run_id, root, "terminal", keep_workspace=True)
    return spec.model_copy(
        update={
            "agent_dir": str(TERMINAL_AGENT),
            "env": {**spec.env, "KEPT_IN": f"{spec.repo}|{run_id}"},
            "stall_seconds": 120,
        }
    )


@pytest.mark.timeout(420)
async def test_every_command_shows_a_hostile_agents_bytes_and_obeys_none(
    dev_server: DevServer, dev_client: Client, tmp_path: Path
) -> None:
    """The agent's output, files, file names, notes, next step, question and choices, last
    words, summary and outputs, and the diff of its workspace: every command that prints any
    of them, in a pipe and on a terminal, shows them escaped; `diff --raw` alone gives the
    bytes, into a pipe."""
    run_id = new_run_id("tty")
    spec = hostile_spec(tmp_path, run_id)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    shown: list[Shown] = []
    async with (
        nothing_left_running(dev_client) as runs,
        in_process_worker(dev_client, "tty") as queue,
    ):
        runs.append(run_id)
        waiting = await asyncio.create_subprocess_exec(
            str(OVERNIGHT),
            "--address",
            dev_server.address,
            "start",
            str(spec_file),
            "--wait",
            "--task-queue",
            queue,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        await wait_for_status(
            dev_client,
            run_id,
            lambda s: s.state == "waiting_for_answer" and bool(s.workspace and s.workspace.kept),
            timeout=120,
        )
        # The agent waits on its question, its first workspace kept.
        for args in (
            ["status", run_id],
            ["status", run_id, "--json"],
            ["list"],
            ["logs", run_id],
            ["logs", run_id, "--json"],
            ["inspect", run_id],
            ["inspect", run_id, "app/notes.md"],
            ["inspect", run_id, "app/notes.md", "--json"],
            ["diff", run_id],
            ["diff", run_id, "--stat"],
            ["answer", run_id, "maybe"],  # refused, naming the agent's choices
        ):
            shown.append(await in_a_pipe(dev_server, *args))
        for args in (["status", run_id], ["diff", run_id], ["inspect", run_id, "app/notes.md"]):
            shown.append(await on_a_terminal(dev_server, *args))
        raw = await in_a_pipe(dev_server, "diff", run_id, "--raw")
        shown.append(await in_a_pipe(dev_server, "answer", run_id, "yes"))

        out, err = await asyncio.wait_for(waiting.communicate(), timeout=240)
        shown.append(Shown("start --wait", waiting.returncode or 0, out, err))
        result = await api.wait_result(dev_client, run_id)
        assert (result.outcome, result.attempts) == ("finished", 2), result

        for args in (
            ["status", run_id],
            ["logs", run_id, "--attempt", "1"],
            ["logs", run_id, "--attempt", "1", "--tail", "2"],
            ["logs", run_id, "--follow", "--attempt", "1"],
            ["diff", run_id, "--step", "1"],
            ["rewind", run_id, "--to", "1"],  # refused: the run has ended
            ["report", "--since", "1h"],
        ):
            shown.append(await in_a_pipe(dev_server, *args))
        for args in (["logs", run_id, "--attempt", "1"], ["status", run_id]):
            shown.append(await on_a_terminal(dev_server, *args))

    obeyed = {one.command: unshown_in(one.out) + unshown_in(one.err) for one in shown}
    assert {command: found for command, found in obeyed.items() if found} == {}
    # Each was fed the agent's bytes, and shows them as their escapes.
    fed = [one.command for one in shown if "\\x1b]0;pwned\\x07" in one.text()]
    fed_json = [one.command for one in shown if "\\u001b]0;pwned\\u0007" in one.text()]
    for command in (
        f"status {run_id}",
        f"logs {run_id}",
        f"inspect {run_id} app/notes.md",
        f"diff {run_id}",
        f"answer {run_id} maybe",
        "start --wait",
        f"logs {run_id} --attempt 1 --tail 2",
        f"logs {run_id} --follow --attempt 1",
        f"diff {run_id} --step 1",
        f"status {run_id} (terminal)",
        f"diff {run_id} (terminal)",
        f"inspect {run_id} app/notes.md (terminal)",
        f"logs {run_id} --attempt 1 (terminal)",
    ):
        assert command in fed, (command, fed)
    for command in (f"status {run_id} --json", f"logs {run_id} --json"):
        assert command in fed_json, (command, fed_json)
    listing = next(one for one in shown if one.command == f"inspect {run_id}")
    assert f"x{HOSTILE_SHOWN}.md" in listing.text()  # a name, shown as written
    inspected = json.loads(next(o for o in shown if o.command.endswith("notes.md --json")).out)
    assert HOSTILE in inspected["text"]  # the document holds the bytes as they are
    diff = next(one for one in shown if one.command == f"diff {run_id}").text()
    assert f"+{HOSTILE_SHOWN}\n+\ttabbed line\n" in diff  # lines and tabs kept
    # `--raw`: the bytes as the agent wrote them, for a program.
    assert raw.code == 0 and f"+{HOSTILE}\n".encode() in raw.out
