"""The coding-agent CLI installer, with a stand-in `npm` (no network): idempotent, atomic,
one install at a time, and `check` saying what is missing and the command that fixes it.
The real install is exercised by tests/agent_clis."""

from __future__ import annotations

import platform
import threading
from pathlib import Path

import pytest

from overnight.core.agent_kinds import CLAUDE_CODE, CODEX, UnsupportedPlatform, agent_cli, npm_cpu
from overnight.core.coding_agents import INSTALL_SCRIPT, install_folder, sandbox_folder
from overnight.worker import agent_clis
from overnight.worker.agent_clis import InstallError, check, install
from tests.waits import CAP

FAKE_NPM = """#!/bin/bash
# install --prefix DIR ... SPEC: make the native binary the installer looks for.
echo "$*" >> "$FAKE_NPM_LOG"
sleep "${FAKE_NPM_SLEEP:-0}"
if [ -n "$FAKE_NPM_FAIL" ]; then echo "npm error 404 Not Found - $FAKE_NPM_FAIL" >&2; exit 1; fi
prefix="$3"
mkdir -p "$(dirname "$prefix/$FAKE_NPM_BINARY")"
printf '#!/bin/sh\\necho "%s"\\n' "$FAKE_NPM_PRINTS" > "$prefix/$FAKE_NPM_BINARY"
chmod 700 "$prefix/$FAKE_NPM_BINARY"
"""


@pytest.fixture
def npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in npm for Claude Code; its calls are logged in `npm.log` beside it."""
    program = tmp_path / "npm"
    program.write_text(FAKE_NPM)
    program.chmod(0o755)
    monkeypatch.setenv("FAKE_NPM_LOG", str(tmp_path / "npm.log"))
    monkeypatch.setenv("FAKE_NPM_BINARY", str(CLAUDE_CODE.executable(_cpu())))
    monkeypatch.setenv("FAKE_NPM_PRINTS", CLAUDE_CODE.version_line)
    return program


def _cpu() -> str:
    return npm_cpu(platform.machine())


def _calls(npm: Path) -> list[str]:
    log = npm.parent / "npm.log"
    return log.read_text().splitlines() if log.exists() else []


def test_install_once_then_nothing(npm: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = install(CLAUDE_CODE, home, npm=str(npm))
    again = install(CLAUDE_CODE, home, npm=str(npm))

    assert first.fresh and not again.fresh
    assert first.folder == install_folder(CLAUDE_CODE, home) == home / "agents/claude-code-2.1.332"
    assert first.executable.is_file() and first.executable == again.executable
    calls = _calls(npm)
    assert len(calls) == 1
    assert "--ignore-scripts" in calls[0] and calls[0].endswith("@anthropic-ai/claude-code@2.1.332")
    # Readable and runnable by a sandbox's own uid, whatever the umask (the stand-in made 700).
    assert first.executable.stat().st_mode & 0o005 == 0o005
    assert [p.name for p in (home / "agents").iterdir() if p.is_dir()] == ["claude-code-2.1.332"]


def test_check_says_what_is_missing_and_the_fix(npm: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    missing = check(CLAUDE_CODE, home)
    assert not missing.ready and missing.fix == INSTALL_SCRIPT
    assert "@anthropic-ai/claude-code@2.1.332 is not installed" in missing.reason
    assert missing.line().endswith(f"; fix: {INSTALL_SCRIPT}")

    installed = install(CLAUDE_CODE, home, npm=str(npm))
    ready = check(CLAUDE_CODE, home)
    assert ready.ready and ready.executable == installed.executable
    assert ready.line() == f"claude-code 2.1.332: ready ({installed.executable})"

    installed.executable.write_text("#!/bin/sh\necho 9.9.9\n")
    broken = check(CLAUDE_CODE, home)
    assert not broken.ready and "'9.9.9'" in broken.reason
    assert broken.fix == f"{INSTALL_SCRIPT} --force"
    assert check(CLAUDE_CODE, home, verify=False).ready  # without running it, it looks fine


def test_a_failed_install_leaves_nothing(
    npm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("FAKE_NPM_FAIL", "@anthropic-ai/claude-code")
    with pytest.raises(InstallError, match="failed \\(exit 1\\): npm error 404 Not Found"):
        install(CLAUDE_CODE, home, npm=str(npm))
    monkeypatch.delenv("FAKE_NPM_FAIL")
    monkeypatch.setenv("FAKE_NPM_PRINTS", "1.0.0 (Claude Code)")
    with pytest.raises(InstallError, match="installed, but .* said '1.0.0 \\(Claude Code\\)'"):
        install(CLAUDE_CODE, home, npm=str(npm))
    assert sorted(p.name for p in (home / "agents").iterdir()) == [".lock-claude-code-2.1.332"]


def test_two_installers_at_once_install_once(
    npm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("FAKE_NPM_SLEEP", "0.5")
    results: list[agent_clis.Installed] = []
    threads = [
        threading.Thread(target=lambda: results.append(install(CLAUDE_CODE, home, npm=str(npm))))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=CAP)

    assert len(_calls(npm)) == 1
    assert sorted(result.fresh for result in results) == [False, True]
    assert results[0].executable == results[1].executable


def test_a_dead_installers_partial_folder_is_removed(npm: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    leftover = home / "agents" / ".partial-claude-code-2.1.332-dead"
    (leftover / "node_modules").mkdir(parents=True)
    install(CLAUDE_CODE, home, npm=str(npm))
    assert not leftover.exists()


def test_force_replaces_the_install(npm: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = install(CLAUDE_CODE, home, npm=str(npm))
    (first.folder / "stale").write_text("from before")
    again = install(CLAUDE_CODE, home, npm=str(npm), force=True)
    assert again.fresh and len(_calls(npm)) == 2
    assert not (again.folder / "stale").exists() and again.executable.is_file()
    assert [p.name for p in (home / "agents").iterdir() if p.is_dir()] == ["claude-code-2.1.332"]


def test_without_npm_the_error_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_clis.shutil, "which", lambda name: None)
    with pytest.raises(InstallError, match=f"npm is not installed.*run {INSTALL_SCRIPT}"):
        install(CODEX, tmp_path / "home")


def test_command_line_check_and_install(
    npm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OVERNIGHT_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(agent_clis.shutil, "which", lambda name: str(npm))
    assert agent_clis.main(["check", "--kind", "claude-code"]) == 1
    assert "claude-code 2.1.332: not available:" in capsys.readouterr().out
    assert agent_clis.main(["install", "--kind", "claude-code"]) == 0
    assert "@anthropic-ai/claude-code@2.1.332: installed in" in capsys.readouterr().out
    assert agent_clis.main(["check", "--kind", "claude-code", "--json"]) == 0
    assert '"ready": true' in capsys.readouterr().out


def test_pins_and_paths() -> None:
    assert agent_cli("codex") is CODEX and CODEX.npm_spec == "@openai/codex@0.171.0"
    with pytest.raises(ValueError, match="unknown agent kind 'aider'"):
        agent_cli("aider")
    assert str(CODEX.executable("arm64")) == (
        "node_modules/@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex"
    )
    assert (
        str(CLAUDE_CODE.executable("x64"))
        == "node_modules/@anthropic-ai/claude-code-linux-x64/claude"
    )
    with pytest.raises(UnsupportedPlatform):
        CLAUDE_CODE.executable("riscv64")
    assert npm_cpu("x86_64") == "x64" and npm_cpu("aarch64") == "arm64"
    assert sandbox_folder(CODEX) == "/overnight/agents/codex-0.171.0"
    assert (
        CODEX.run_environment("/x")["CODEX_MANAGED_PACKAGE_ROOT"] == "/x/node_modules/@openai/codex"
    )
