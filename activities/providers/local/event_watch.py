"""`watch` for local agents woken by the kernel, not by a timer.

A watch looks (LocalLook: a few stat calls) when something may have changed, and between looks
waits on the worker's shared WatchHub:

- the agent's end: a pidfd of its process (it ends: woken in microseconds, by any worker
  process, not only the one that started it: agents run detached, the worker is never their
  parent), and inotify on its folder for `exit.json`, the launcher's record of the exit code,
  which is what the look reads (and all a worker has when no pidfd can be had);
- the sandbox's state: inotify on its folder for `sandbox.json` (a pause, a stop, a lease end
  the launcher acted on), and a timer at the lease end;
- the checkpoint (and the kit's requests file beside it, when watched), only while a touch is
  news (`report_touch`): inotify one-shot on its folder, which the agent writes into (see
  watch_hub for the bounds).

A part that cannot be watched (no inotify, a watch limit, a folder missing or outside the
workspace) is looked at on the old timer (`LOOK_INTERVAL_SECONDS`); everything else is looked at
every `BACKSTOP_SECONDS` all the same, so a lost event costs time, never the run.
"""

from __future__ import annotations

import time
from pathlib import Path, PurePosixPath

from activities.providers.local import launcher
from activities.providers.local.agent_looks import LocalLook
from activities.providers.local.files import OutsideWorkspace, read_json
from activities.providers.local.state import SANDBOX_FILE
from activities.providers.local.watch_hub import Subscription, WatchHub
from activities.providers.polling_watch import LOOK_INTERVAL_SECONDS, last_sighting, news_in
from activities.providers.protocol import Sighting

# A look however quiet the kernel is: what a lost event can cost at most.
BACKSTOP_SECONDS = 10.0
_SANDBOX_NAMES = frozenset({SANDBOX_FILE})
_EXIT_NAMES = frozenset({launcher.EXIT_FILE})


async def event_watch(
    hub: WatchHub,
    look: LocalLook,
    *,
    token: str | None,
    wait_seconds: float,
    report_touch: bool = True,
    backstop: float = BACKSTOP_SECONDS,
) -> Sighting:
    """Like `poll_watch`: news as soon as the kernel tells of it, or the last look at the end."""
    give_up = time.monotonic() + wait_seconds
    folder = look.engine.folder(look.sandbox_id)
    proc_dir = folder / "processes" / look.process_id
    checkpoint_dir = _checkpoint_dir(look) if report_touch else None
    with hub.subscription() as sub:
        following_pid = False
        while True:
            sub.clear()
            watched = sub.follow_folder(folder, _SANDBOX_NAMES) & sub.follow_folder(
                proc_dir, _EXIT_NAMES
            )
            if report_touch:
                watched &= checkpoint_dir is not None and sub.follow_folder(
                    checkpoint_dir[0], checkpoint_dir[1], oneshot=True
                )
            seen = look()
            news = news_in(seen, token, report_touch=report_touch)
            if news is not None:
                return news
            left = give_up - time.monotonic()
            if left <= 0:
                return last_sighting(seen, token)
            if not following_pid:
                following_pid = _follow_agent(sub, proc_dir)
            wait = min(left, backstop if watched else LOOK_INTERVAL_SECONDS)
            await sub.wait(min(wait, _until_lease_end(look)))


def _follow_agent(sub: Subscription, proc_dir: Path) -> bool:
    """A pidfd of the agent, from the launcher's record (its pid and the kernel's start time
    of it, so a pid taken over by a later process is not followed)."""
    started = read_json(proc_dir / launcher.PROCESS_FILE)
    pid = started.get("pid") if started else None
    if not isinstance(pid, int) or pid <= 0:
        return False
    start = started.get("proc_start") if started else None
    return sub.follow_pid(pid, start if isinstance(start, str) else None)


def _checkpoint_dir(look: LocalLook) -> tuple[Path, frozenset[str]] | None:
    """The host folder the checkpoint is written into, when it is in the workspace, and the
    names watched in it: the checkpoint's, and the kit's requests file's (written beside it)."""
    workspace = look.engine.workspace(look.sandbox_id)
    try:
        path = workspace.host_path(look.checkpoint_path)
        real = path.parent.resolve()
    except (OutsideWorkspace, OSError, RuntimeError):
        return None
    if not workspace.inside(real):
        return None
    names = {path.name}
    if look.requests_path is not None:
        requests = PurePosixPath(look.requests_path)
        if requests.parent != PurePosixPath(look.checkpoint_path).parent:
            return None  # not beside it: looked at on the timer
        names.add(requests.name)
    return real, frozenset(names)


def _until_lease_end(look: LocalLook) -> float:
    deadline = look.deadline
    if deadline is None:
        return float("inf")
    # Just past it, so the look finds it ended (and enforces it).
    return max(0.0, deadline - time.time()) + 0.01
