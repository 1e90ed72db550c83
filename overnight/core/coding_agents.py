"""Where the coding-agent CLIs (`overnight.core.agent_kinds`) are installed and how sandboxes see
them. Pure constants and paths; installing is `overnight.worker.agent_clis`.

Each CLI is installed once per worker from the npm registry, into
`$OVERNIGHT_HOME/agents/<kind>-<version>/` (an npm prefix: `node_modules/...` under it), and
mounted read-only into local sandboxes at `/overnight/agents/<kind>-<version>/` (a top-level
folder of the sandbox's own, since `/usr` and `/opt` are the host's, read-only).

The CLIs are run as their native binaries, straight from the platform package npm picked
(`executable`), not through the npm launchers: Claude Code's `bin/claude.exe` is only linked
to the native binary by a postinstall script (the installer runs none), and Codex's
`bin/codex.js` on node < 22.15 spawns the binary as a child, so a SIGKILL of the launcher
leaves the real CLI running. The native binaries need no node at run time; `npm` (and so
node) is needed only to install.
"""

from __future__ import annotations

from pathlib import Path

from overnight.core.agent_kinds import AgentCli, UnsupportedPlatform, npm_cpu
from overnight.core.home import overnight_home
from overnight.core.provider_traits import traits

AGENTS_FOLDER = "agents"  # under $OVERNIGHT_HOME
# In an install folder: what was installed (written last, so its presence means "whole").
INSTALLED_MARKER = ".overnight-installed.json"
SANDBOX_AGENTS_ROOT = "/overnight/agents"  # where a local sandbox sees the installed CLIs
# Where a sandbox whose CLI comes from a template snapshot holds its copy (no mount there;
# files are written only under /workspace on Runtime).
TEMPLATE_AGENTS_ROOT = "/workspace/.overnight/agents"
INSTALL_SCRIPT = "bash scripts/install-agent-clis"  # the one command that installs them


def agents_root(home: Path | None = None) -> Path:
    """`$OVERNIGHT_HOME/agents`: every installed CLI, one folder per kind and version."""
    return (home if home is not None else overnight_home()) / AGENTS_FOLDER


def install_folder(cli: AgentCli, home: Path | None = None) -> Path:
    return agents_root(home) / cli.folder_name


def sandbox_folder(cli: AgentCli, provider: str = "local") -> str:
    """Where a sandbox sees `install_folder(cli)`: mounted read-only in a local one, copied
    (from its template snapshot) into a Runtime one."""
    root = TEMPLATE_AGENTS_ROOT if traits(provider).cli_from_template else SANDBOX_AGENTS_ROOT
    return f"{root}/{cli.folder_name}"


def sandbox_executable(cli: AgentCli, machine: str, provider: str = "local") -> str:
    """The native binary's path as a sandbox sees it (`machine`: `platform.machine()`)."""
    return f"{sandbox_folder(cli, provider)}/{cli.executable(npm_cpu(machine))}"


def install_problem(cli: AgentCli, machine: str, home: Path | None = None) -> str | None:
    """Why this worker cannot hand `cli` to a sandbox (one line ending with the command that
    fixes it), or None. Looks only (a marker and the binary): no `--version` run, so it is
    cheap enough for every run's start; `overnight.worker.agent_clis.check` runs it too."""
    try:
        binary = install_folder(cli, home) / cli.executable(npm_cpu(machine))
    except UnsupportedPlatform as error:
        return str(error)
    if not (install_folder(cli, home) / INSTALLED_MARKER).is_file() or not binary.is_file():
        return (
            f"{cli.kind} {cli.version} is not installed on this worker ({cli.npm_spec} is not in "
            f"{agents_root(home)}): run {INSTALL_SCRIPT} there"
        )
    return None
