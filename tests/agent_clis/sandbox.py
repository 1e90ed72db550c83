"""A bubblewrap sandbox for a real coding-agent CLI, mounted as the local provider will:

| inside | what |
|---|---|
| `/usr`, `/etc` (and `/bin`, `/lib*`, `/sbin`) | the host's, read-only |
| `/overnight/agents/<kind>-<version>` | the installed CLI, read-only (never copied) |
| `/workspace` | the sandbox's work folder, writable |
| `/home/agent` (`$HOME`) | writable; `/home` made traversable (0755) before it is bound |
| `/tmp` | a tmpfs, mode 1777 |
| `/overnight`, `/overnight/agents` | made 0755 (see below) |

bubblewrap run as root makes the folders it creates for mount points 0700, which the sandbox's
uid cannot cross: every parent of a mount is made 0755 first (`--perms 0755 --dir`).

As root, the CLI runs as an unprivileged uid with no capabilities (`setpriv`), like the local
provider's sandbox user; as another user, as that user. The network is the host's (the fake
model API is on its loopback). Without a working bubblewrap the CLI runs on the host instead
(`isolated` False), in the same folders.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from overnight.core.agent_kinds import AgentCli, npm_cpu
from overnight.core.coding_agents import sandbox_folder

SANDBOX_UID = 1_000_000_999  # no passwd entry, like the local provider's sandbox uids
WORK = "/workspace"
HOME = "/home/agent"
SYSTEM_FOLDERS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@functools.cache
def bubblewrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--", "true"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


@dataclass(frozen=True)
class Sandbox:
    root: Path  # host folder holding work/ and home/
    cli: AgentCli
    cli_folder: Path  # the install on the host
    isolated: bool
    uid: int | None  # the uid it runs as (None: the test's own)

    @classmethod
    def make(cls, root: Path, cli: AgentCli, cli_folder: Path, isolated: bool) -> Sandbox:
        uid = SANDBOX_UID if isolated and os.geteuid() == 0 else None
        for folder in (root, root / "work", root / "home"):
            folder.mkdir(parents=True, exist_ok=True)
            if uid is not None:
                os.chown(folder, uid, uid)
        return cls(root, cli, cli_folder, isolated, uid)

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def home(self) -> Path:
        return self.root / "home"

    # --- paths as the CLI sees them ---

    @property
    def work_inside(self) -> str:
        return WORK if self.isolated else str(self.work)

    @property
    def home_inside(self) -> str:
        return HOME if self.isolated else str(self.home)

    @property
    def cli_folder_inside(self) -> str:
        return sandbox_folder(self.cli) if self.isolated else str(self.cli_folder)

    @property
    def executable_inside(self) -> str:
        return f"{self.cli_folder_inside}/{self.cli.executable(npm_cpu(os.uname().machine))}"

    # --- the command ---

    def command(self, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run `argv` (paths as inside) in this sandbox."""
        base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.home_inside, "LANG": "C.UTF-8"}
        env = base | self.cli.run_environment(self.cli_folder_inside) | env
        if not self.isolated:
            return argv, env
        bwrap = shutil.which("bwrap")
        assert bwrap is not None
        mounts = [bwrap, "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for folder in SYSTEM_FOLDERS:
            if os.path.islink(folder):
                mounts += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                mounts += ["--ro-bind", folder, folder]
        mounts += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"]
        mounts += ["--perms", "0755", "--dir", "/home", "--bind", str(self.home), HOME]
        mounts += ["--bind", str(self.work), WORK]
        mounts += ["--perms", "0755", "--dir", "/overnight", "--perms", "0755", "--dir"]
        mounts += ["/overnight/agents", "--ro-bind", str(self.cli_folder), self.cli_folder_inside]
        mounts += ["--chdir", WORK, "--unshare-pid", "--die-with-parent", "--clearenv"]
        for name, value in env.items():
            mounts += ["--setenv", name, value]
        user: list[str] = []
        if self.uid is not None:
            user = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
            user += ["--bounding-set=-all", "--inh-caps=-all", "--"]
        return [*mounts, "--", *user, *argv], {"PATH": os.environ.get("PATH", os.defpath)}
