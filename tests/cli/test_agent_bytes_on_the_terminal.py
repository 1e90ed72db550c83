"""What `overnight logs`, `status` and `inspect` print of an agent's bytes cannot drive the
operator's terminal (escape sequences are shown, not obeyed) and shows no part of a secret,
wherever the output was cut. Real local sandboxes and agents for `logs`."""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from activities.providers.forensics import FileEntry, FileListing
from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import AgentLaunch
from overnight.agent_requests import RunOutputs
from overnight.cli import forensics as inspect_cli
from overnight.cli import logs
from overnight.cli.render import status_text, terminal_safe
from overnight.cli.run_view import RunView
from overnight.models import Budget, CheckpointSummary, LastWords, RunSpec, RunStatus
from tests.providers.test_behaviour import request

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
    for _ in range(200):
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


def test_inspect_escapes_a_file_on_a_terminal_and_copies_it_exactly_into_a_pipe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    about: dict[str, Any] = {"path": "/workspace/notes.txt"}
    data = f"notes {PWNED}\n".encode()
    inspect_cli._print_file(about, data, [], json_out=False, tty=True)
    assert capsys.readouterr().out == f"notes {SHOWN}\n"
    inspect_cli._print_file(about, b"\x1b[2J\xff\xfe", [], json_out=False, tty=True)
    assert capsys.readouterr().out == "\\x1b[2J\\xff\\xfe"


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
