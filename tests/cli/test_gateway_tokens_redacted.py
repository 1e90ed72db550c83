"""An agent's output shows none of the gateway's tokens, wherever it is shown: `overnight logs`
(and `--follow`, the same printer), the console's live output and `overnight inspect` of a
file. The reader may not know the run's tokens (the console, a CLI on another machine), so
they are found by their shape: git prints its origin's URL (`To http://.../git/<sandbox>/<token>/app`),
a proxy URL holds `sandbox-<name>:<token>@`. A real local sandbox and agent."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from activities.providers.local.engine import LocalEngine
from activities.providers.local.provider import LocalProvider
from overnight.cli import forensics as inspect_cli
from overnight.cli import logs
from overnight.console.run_output import OutputLines
from tests.cli.test_agent_bytes_on_the_terminal import agent_printed

TOKEN = "0ab2c792" * 4
ORIGIN = f"http://127.0.0.1:32397/git/ovn-tty-1/{TOKEN}/app"
PROXY = f"http://sandbox-ovn-tty-1:{TOKEN}@127.0.0.1:32397"


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(LocalEngine(tmp_path / "home"))
    try:
        yield provider
    finally:
        for info in await provider.list({}, include_stopped=False):
            await provider.stop(info.sandbox_id)


async def test_an_agent_printing_its_origin_and_proxy_urls_shows_no_token_in_logs_or_console(
    local: LocalProvider,
) -> None:
    view = await agent_printed(local, f"echo 'To {ORIGIN}'; printf 'proxy {PROXY}'")
    # No secrets known to the reader: the console's case, and a CLI's on another machine.
    for out in (io.StringIO(), OutputLines()):
        await logs.show_attempt(view, local, 1, logs.Printer([], out), tail=None)
        shown = (
            out.getvalue()
            if isinstance(out, io.StringIO)
            else "\n".join(line for _, line in out.lines)
        )
        assert TOKEN not in shown
        assert "To http://127.0.0.1:32397/git/ovn-tty-1/***/app" in shown
        assert "proxy http://sandbox-ovn-tty-1:***@127.0.0.1:32397" in shown


def test_inspect_of_a_git_config_shows_no_token(capsys: pytest.CaptureFixture[str]) -> None:
    config = f'[remote "origin"]\n\turl = {ORIGIN}\n'.encode()
    inspect_cli._print_file({}, config, [], json_out=False)
    shown = capsys.readouterr().out
    assert TOKEN not in shown and "/git/ovn-tty-1/***/app" in shown


def test_a_token_cut_at_the_output_end_shows_no_part_of_it() -> None:
    out = io.StringIO()
    logs.Printer([], out).output(1, "p", f"To {ORIGIN[:-20]}".encode(), final=True)
    assert out.getvalue() == "To http://127.0.0.1:32397/git/ovn-tty-1/***\n"
