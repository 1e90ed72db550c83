"""A local sandbox's cgroup: what pause freezes, wake thaws and stop kills.

Every process of a sandbox (its agents, its commands) is put in the sandbox's own cgroup
before it runs anything of the sandbox's (`join_prefix`), so the kernel's freezer holds all
of them at once, however they fork: no process can be missed, or woken by another. Kinds
(`SandboxMeta.freezer`, decided when the sandbox is made, see cgroup_plan):

- `cgroup2`: `cgroup.freeze` of its cgroup on a cgroup v2 hierarchy, done when
  `cgroup.events` says `frozen 1`; stop writes `cgroup.kill`.
- `cgroup1`: the v1 `freezer` controller (`freezer.state` FROZEN); stop freezes, SIGKILLs
  every member and thaws (a frozen process dies only once thawed).

A stop (`kill`) repeats its round until every cgroup of the sandbox (the freezer's and the
limits' ones) is empty, and says whether they are: the engine's stop is done only then.
- `systemd`: a systemd slice of its own (a worker that is not root: the user's manager
  delegates its cgroups), frozen and killed through its v2 files like `cgroup2`.
- `none`: no cgroup could be had; a pause ends its agents instead (see engine).
- `signals`: sandboxes made before cgroups, paused with SIGSTOP as they were.

Standard library only: the launcher loads it by path (it runs with `python -I`).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

CGROUP2 = "cgroup2"
CGROUP1 = "cgroup1"
SYSTEMD = "systemd"
NONE = "none"
SIGNALS = "signals"
FROZEN_KINDS = (CGROUP2, CGROUP1, SYSTEMD)
# How long a freeze (or a kill) may take to be done before it counts as failed.
FREEZE_SECONDS = 10.0
KILL_SECONDS = 10.0
# A kill round's freeze (v1): short, since the next round tries again.
ROUND_FREEZE_SECONDS = 1.0
# A process writes its own pid here, then execs what follows (`exec` keeps the pid), so
# nothing of the sandbox runs outside its cgroup, even for an instant. A failed write ends it
# (set -e): nothing runs uncontained.
JOIN_SCRIPT = (
    'set -e; while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs"; shift; done; shift; exec "$@"'
)


class FreezeTimeout(RuntimeError):
    """The freezer did not finish in time (a process stuck in the kernel): the freeze stays
    asked for, and the caller tries again."""


def join_prefix(dirs: list[str], systemd_slice: str | None = None) -> list[str]:
    """What goes before a sandbox command so that it runs inside the cgroups `dirs` (or, for
    a systemd sandbox, in a scope of its slice)."""
    if systemd_slice is not None:
        user = [] if os.geteuid() == 0 else ["--user"]
        return ["systemd-run", *user, "--scope", "--quiet", "--collect"] + [
            f"--slice={systemd_slice}",
            "--",
        ]
    if not dirs:
        return []
    return ["/bin/sh", "-c", JOIN_SCRIPT, "overnight-cgroup", *dirs, "--"]


def _write(path: Path, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _wait(done: object, seconds: float) -> bool:
    give_up = time.monotonic() + seconds
    pause = 0.0005
    while True:
        if done():  # type: ignore[operator]
            return True
        if time.monotonic() >= give_up:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _events(folder: Path) -> dict[str, str]:
    lines = (line.split() for line in _read(folder / "cgroup.events").splitlines())
    return {words[0]: words[1] for words in lines if len(words) == 2}


def freeze(kind: str, path: str, *, seconds: float = FREEZE_SECONDS) -> None:
    """Freeze the cgroup and wait until every process in it is frozen (`FreezeTimeout`
    after `seconds`, the freeze still asked for). A cgroup that is not there holds nothing
    to freeze (after a reboot, say): nothing runs in it."""
    folder = Path(path)
    if not folder.is_dir():
        return
    if kind == CGROUP1:
        state = folder / "freezer.state"

        def frozen() -> bool:
            # The kernel's advice: write FROZEN again while it says FREEZING.
            if _read(state).strip() == "FROZEN":
                return True
            _write(state, "FROZEN")
            return False

        _write(state, "FROZEN")
        done = _wait(frozen, seconds)
    else:
        _write(folder / "cgroup.freeze", "1")
        done = _wait(lambda: _events(folder).get("frozen") == "1", seconds)
    if not done:
        raise FreezeTimeout(f"the sandbox's cgroup {path} did not freeze within {seconds:g} s")


def thaw(kind: str, path: str) -> None:
    folder = Path(path)
    if not folder.is_dir():
        return
    if kind == CGROUP1:
        _write(folder / "freezer.state", "THAWED")
    else:
        _write(folder / "cgroup.freeze", "0")


def frozen(kind: str, path: str) -> bool:
    """Whether the cgroup is frozen now (every process in it held)."""
    folder = Path(path)
    if kind == CGROUP1:
        return _read(folder / "freezer.state").strip() == "FROZEN"
    return _events(folder).get("frozen") == "1"


def members(path: str, *, below: bool = False) -> set[int]:
    """The processes in the cgroup; `below`: in the cgroups under it too (a systemd slice's
    processes are in its scopes)."""
    found = {int(word) for word in _read(Path(path) / "cgroup.procs").split()}
    if below:
        for folder, _, _ in os.walk(path):
            found |= {int(word) for word in _read(Path(folder) / "cgroup.procs").split()}
    return found


def kill(kind: str, path: str, dirs: list[str], *, seconds: float = KILL_SECONDS) -> bool:
    """SIGKILL every process of the sandbox's cgroups, round after round until all of `dirs`
    are empty; True when they are (False: something still runs after `seconds`).

    One round is not enough: a process that has joined some of the sandbox's cgroups but not
    yet the freezer's (the join goes one cgroup at a time) escapes the freezer's kill, and on
    v1 a freeze that does not finish leaves forks racing the SIGKILLs."""

    def ended() -> bool:
        if all(empty(d) for d in dirs):
            return True
        kill_round(kind, path, dirs)
        return all(empty(d) for d in dirs)

    return _wait(ended, seconds)


def kill_round(kind: str, path: str, dirs: list[str]) -> None:
    """One round of `kill`: the freezer's cgroup killed whole (v2's `cgroup.kill`, which also
    kills a fork racing it; else frozen, SIGKILLed and thawed: a frozen process dies only once
    thawed), then whatever is in the sandbox's other cgroups."""
    folder = Path(path)
    if folder.is_dir():
        if kind != CGROUP1 and (folder / "cgroup.kill").exists():
            _write(folder / "cgroup.kill", "1")
        else:
            try:
                freeze(kind, path, seconds=ROUND_FREEZE_SECONDS)
            except FreezeTimeout:
                pass  # killed unfrozen; the next round catches what forked meanwhile
            _kill_all(members(path, below=kind != CGROUP1))
            thaw(kind, path)
    for other in dirs:
        if other != path and Path(other).is_dir():
            _kill_all(members(other, below=kind != CGROUP1))


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def empty(path: str) -> bool:
    """No process left in the cgroup (v2: nor under it, a systemd slice's scopes say)."""
    folder = Path(path)
    if not folder.is_dir():
        return True
    populated = _events(folder).get("populated")
    return populated == "0" if populated is not None else not members(path)


def remove(dirs: list[str], *, seconds: float = 2.0) -> bool:
    """Remove the (emptied) cgroups; True when none is left. A cgroup still busy (a process
    not yet gone) is tried again for `seconds`; one left behind is `overnight reap`'s."""

    def gone() -> bool:
        for folder in dirs:
            try:
                os.rmdir(folder)
            except FileNotFoundError:
                pass
            except OSError:
                return False
        return True

    return _wait(gone, seconds)
