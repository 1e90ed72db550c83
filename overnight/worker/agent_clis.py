"""Installing the pinned coding-agent CLIs on this worker, and saying which kinds it can run.

`install(cli)` puts `cli` (`overnight.core.coding_agents`) into
`$OVERNIGHT_HOME/agents/<kind>-<version>/` once:
- **idempotent**: a folder with its `.overnight-installed.json` and a working binary is left
  as it is (no npm, no network);
- **atomic**: npm installs into a `.partial-...` folder beside it, the binary is checked
  (`--version`), then one `rename` makes it the install; a killed install leaves only a
  partial folder, removed by the next install;
- **one at a time**: an flock per kind and version, so two workers (or test processes) on one
  machine install it once, the second waiting for the first;
- **no install scripts** (`--ignore-scripts`): the native binaries come from the registry as
  the platform packages; nothing the packages ship runs at install time.

`check(cli)` says whether this worker can run the kind and, when not, why and the one command
that fixes it (`bash scripts/install-agent-clis`). `python -m overnight.worker.agent_clis
install|check [--kind KIND] [--json]` is the command line both use.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from overnight.core.agent_kinds import AGENT_CLIS, AgentCli, UnsupportedPlatform, agent_cli, npm_cpu
from overnight.core.coding_agents import (
    INSTALL_SCRIPT,
    INSTALLED_MARKER,
    agents_root,
    install_folder,
)

MARKER = INSTALLED_MARKER
PARTIAL_PREFIX = ".partial-"
LOCK_PREFIX = ".lock-"
NPM_TIMEOUT_SECONDS = 900
VERSION_TIMEOUT_SECONDS = 30


class InstallError(Exception):
    """The CLI could not be installed; the message says why and what to do."""


@dataclass(frozen=True)
class Installed:
    kind: str
    version: str
    folder: Path
    executable: Path
    seconds: float  # how long this call took (waiting for another installer included)
    fresh: bool  # this call ran npm (False: it was there already)


@dataclass(frozen=True)
class Readiness:
    """Whether this worker can run `kind`: `ready`, else `reason` and the `fix` command."""

    kind: str
    version: str
    ready: bool
    reason: str = ""
    fix: str = ""
    executable: Path | None = None

    def line(self) -> str:
        if self.ready:
            return f"{self.kind} {self.version}: ready ({self.executable})"
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{self.kind} {self.version}: not available: {self.reason}{fix}"


# --- where things are ---


def executable_path(cli: AgentCli, home: Path | None = None, machine: str | None = None) -> Path:
    cpu = npm_cpu(machine or platform.machine())
    return install_folder(cli, home) / cli.executable(cpu)


def run_environment(cli: AgentCli, home: Path | None = None) -> dict[str, str]:
    """What the native binary expects from its launcher, for a process on this host."""
    return cli.run_environment(str(install_folder(cli, home)))


# --- checking ---


def check(cli: AgentCli, home: Path | None = None, *, verify: bool = True) -> Readiness:
    """Can this worker run `cli`? `verify` also runs `--version` (10-100 ms)."""
    try:
        binary = executable_path(cli, home)
    except UnsupportedPlatform as error:
        return Readiness(cli.kind, cli.version, False, str(error))
    folder = install_folder(cli, home)
    if not _marked(folder, cli) or not binary.is_file():
        where = agents_root(home)
        return Readiness(
            cli.kind,
            cli.version,
            False,
            f"{cli.npm_spec} is not installed in {where}",
            INSTALL_SCRIPT,
        )
    if verify:
        problem = _version_problem(cli, binary, run_environment(cli, home))
        if problem:
            return Readiness(cli.kind, cli.version, False, problem, f"{INSTALL_SCRIPT} --force")
    return Readiness(cli.kind, cli.version, True, executable=binary)


def check_all(home: Path | None = None, *, verify: bool = True) -> list[Readiness]:
    return [check(cli, home, verify=verify) for cli in AGENT_CLIS.values()]


def _marked(folder: Path, cli: AgentCli) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("npm_spec") == cli.npm_spec


def _version_problem(cli: AgentCli, binary: Path, env: dict[str, str]) -> str:
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_SECONDS,
            env=os.environ | env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{binary} does not run: {error}"
    printed = done.stdout.strip()
    if done.returncode != 0 or printed != cli.version_line:
        said = (printed or done.stderr.strip())[-200:]
        return (
            f"{binary} --version said {said!r} (exit {done.returncode}), not {cli.version_line!r}"
        )
    return ""


# --- installing ---


def install(
    cli: AgentCli,
    home: Path | None = None,
    *,
    force: bool = False,
    npm: str | None = None,
    lock_timeout: float = NPM_TIMEOUT_SECONDS,
) -> Installed:
    """Install `cli` unless it is there already (see the module's docstring)."""
    started = time.monotonic()
    root = agents_root(home)
    root.mkdir(parents=True, exist_ok=True)
    folder = install_folder(cli, home)
    binary = executable_path(cli, home)
    if not force and _usable(cli, home):
        return Installed(cli.kind, cli.version, folder, binary, 0.0, False)
    with _locked(root / f"{LOCK_PREFIX}{cli.folder_name}", lock_timeout, cli):
        if not force and _usable(cli, home):  # another installer finished meanwhile
            return Installed(
                cli.kind, cli.version, folder, binary, time.monotonic() - started, False
            )
        _remove_partials(root, cli)
        partial = root / f"{PARTIAL_PREFIX}{cli.folder_name}-{secrets.token_hex(4)}"
        partial.mkdir()
        try:
            _npm_install(cli, partial, npm)
            problem = _version_problem(
                cli,
                partial / cli.executable(npm_cpu(platform.machine())),
                cli.run_environment(str(partial)),
            )
            if problem:
                raise InstallError(f"{cli.npm_spec} installed, but {problem}")
            _readable_by_all(partial)
            _write_marker(partial, cli, time.monotonic() - started)
            _replace(partial, folder)
        finally:
            if partial.exists():
                shutil.rmtree(partial, ignore_errors=True)
    return Installed(cli.kind, cli.version, folder, binary, time.monotonic() - started, True)


def install_all(
    kinds: Sequence[str] = tuple(AGENT_CLIS), home: Path | None = None, *, npm: str | None = None
) -> list[Installed]:
    return [install(agent_cli(kind), home, npm=npm) for kind in kinds]


def _usable(cli: AgentCli, home: Path | None) -> bool:
    return _marked(install_folder(cli, home), cli) and executable_path(cli, home).is_file()


def _npm_install(cli: AgentCli, prefix: Path, npm: str | None) -> None:
    program = npm or shutil.which("npm")
    if program is None:
        raise InstallError(
            f"npm is not installed, so {cli.npm_spec} cannot be: run {INSTALL_SCRIPT} "
            "(it installs nodejs and npm with apt), or install npm yourself"
        )
    command = [
        program,
        "install",
        "--prefix",
        str(prefix),
        "--no-audit",
        "--no-fund",
        "--ignore-scripts",
        "--no-update-notifier",
        "--loglevel=error",
        cli.npm_spec,
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
            cwd=prefix,
        )
    except subprocess.TimeoutExpired:
        raise InstallError(
            f"npm install {cli.npm_spec} took over {NPM_TIMEOUT_SECONDS} s: is the npm "
            "registry reachable (npm ping)?"
        ) from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip())[-800:]
        raise InstallError(f"npm install {cli.npm_spec} failed (exit {done.returncode}): {said}")


def _readable_by_all(folder: Path) -> None:
    """Every user may read (and run) the install, whatever the worker's umask: a sandbox's
    own uid runs it from the read-only mount."""
    for place, _folders, files in os.walk(folder):
        os.chmod(place, os.stat(place).st_mode | 0o755)
        for name in files:
            path = os.path.join(place, name)
            mode = os.lstat(path).st_mode
            if not os.path.islink(path):
                os.chmod(path, mode | 0o444 | (0o111 if mode & 0o100 else 0))


def _write_marker(folder: Path, cli: AgentCli, seconds: float) -> None:
    marker = {
        "kind": cli.kind,
        "npm_spec": cli.npm_spec,
        "version": cli.version,
        "installed_at": time.time(),
        "install_seconds": round(seconds, 2),
    }
    temporary = folder / (MARKER + ".tmp")
    temporary.write_text(json.dumps(marker), encoding="utf-8")
    temporary.rename(folder / MARKER)


def _replace(partial: Path, folder: Path) -> None:
    """Make `partial` the install at `folder`; an old (broken or forced) one is set aside
    first and deleted after, so `folder` is always a whole install or absent."""
    old: Path | None = None
    if folder.exists():
        old = folder.with_name(f"{PARTIAL_PREFIX}{folder.name}-old-{secrets.token_hex(4)}")
        folder.rename(old)
    partial.rename(folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _remove_partials(root: Path, cli: AgentCli) -> None:
    """Partial folders of this kind and version: left by an installer that died (we hold
    the lock, so no live one is writing them)."""
    for leftover in root.glob(f"{PARTIAL_PREFIX}{cli.folder_name}-*"):
        shutil.rmtree(leftover, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path, timeout: float, cli: AgentCli) -> Iterator[None]:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InstallError(
                        f"another process has been installing {cli.npm_spec} for over "
                        f"{timeout:.0f} s (lock {path})"
                    ) from None
                time.sleep(0.2)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


# --- command line ---


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m overnight.worker.agent_clis",
        description="Install the pinned coding-agent CLIs, or say which kinds can run here.",
    )
    parser.add_argument("action", choices=("install", "check"))
    parser.add_argument("--kind", action="append", choices=sorted(AGENT_CLIS), help="repeatable")
    parser.add_argument("--force", action="store_true", help="install again even if there")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    kinds = args.kind or list(AGENT_CLIS)
    if args.action == "check":
        states = [check(agent_cli(kind)) for kind in kinds]
        if args.json:
            print(
                json.dumps(
                    [
                        asdict(state) | {"executable": str(state.executable or "")}
                        for state in states
                    ]
                )
            )
        else:
            for state in states:
                print(state.line())
        return 0 if all(state.ready for state in states) else 1
    results = []
    for kind in kinds:
        cli = agent_cli(kind)
        try:
            done = install(cli, force=args.force)
        except (InstallError, UnsupportedPlatform) as error:
            print(f"{cli.npm_spec}: {error}", file=sys.stderr)
            return 1
        results.append(done)
        if not args.json:
            how = f"installed in {done.seconds:.1f} s" if done.fresh else "already installed"
            print(f"{cli.npm_spec}: {how}: {done.executable}")
    if args.json:
        print(
            json.dumps(
                [
                    asdict(r) | {"folder": str(r.folder), "executable": str(r.executable)}
                    for r in results
                ]
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
