"""One inotify instance per worker process, shared by every local watch, and the agents' pidfds.

A watch subscribes to what can change its run (see event_watch): folders (the sandbox's, for
`sandbox.json`; the agent's, for `exit.json`; the checkpoint's, for the checkpoint) and the
agent's process (a pidfd). The hub reads inotify on the event loop (`add_reader`, one fd for
every run) and wakes the subscriptions whose folder saw a name they asked for; a pidfd wakes
its subscription when the process ends. Waking is a flag and a future: many events before a
subscription looks again cost one look.

What an agent controls is bounded: a folder it may write into (the checkpoint's) is watched
one-shot (`IN_ONESHOT`: the kernel drops the watch after one event, so a flood of writes
costs one event) and re-armed at most once per `REARM_SECONDS`; the hub reads at most
`READ_BUDGET` events per turn of the loop; an inotify queue overflow wakes every subscription.
A folder that cannot be watched (missing, a watch limit reached, a second watch on one folder)
is reported, and its subscriber looks on a timer instead.

Why a hub and not watchfiles: watchfiles (notify) runs a thread and an inotify instance per
watcher over a fixed set of paths; here paths come and go with runs, all on one instance.
`asyncinotify` (ctypes over libc's inotify) gives that, with no thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from asyncinotify import InitFlags, Inotify, Mask, Watch

from activities.providers.local import ns as local_ns

log = logging.getLogger(__name__)

# Events read per turn of the event loop, so a burst never holds the loop for long.
READ_BUDGET = 2048
# A one-shot folder (one the agent writes into) is watched again at most this often.
REARM_SECONDS = 0.25
# The kernel's buffer is read this many full-size events at a time.
BATCH_EVENTS = 64
# A folder watched for the records written into it (temp file + rename), and for going away.
RECORD_MASK = Mask.MOVED_TO | Mask.DELETE_SELF | Mask.MOVE_SELF
# A folder the agent writes its checkpoint into: a rename into it, or a file closed after a
# write in place.
WRITE_MASK = Mask.MOVED_TO | Mask.CLOSE_WRITE | Mask.DELETE_SELF | Mask.MOVE_SELF
_GONE = Mask.DELETE_SELF | Mask.MOVE_SELF | Mask.IGNORED | Mask.UNMOUNT
# Never follow a final link, only folders, and never take over another entry's watch.
_ADD_FLAGS = Mask.DONT_FOLLOW | Mask.ONLYDIR | Mask.MASK_CREATE


@dataclass(eq=False)
class _Listener:
    names: frozenset[str]
    wake: Callable[[], None]


@dataclass(eq=False)
class _Folder:
    """One watched folder and who listens to it. `watch` None: not watched now (a one-shot
    folder that fired, or a folder gone)."""

    path: Path
    mask: Mask
    oneshot: bool
    watch: Watch | None = None
    listeners: list[_Listener] = field(default_factory=list)
    fired_at: float = 0.0
    rearm: asyncio.TimerHandle | None = None


class WatchHub:
    """The worker process's inotify instance and pidfds, on one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, use_pidfd: bool = True) -> None:
        self.loop = loop
        self.use_pidfd = use_pidfd and hasattr(os, "pidfd_open")
        self._inotify = Inotify(InitFlags.CLOEXEC, cache_size=BATCH_EVENTS)
        # Set here: asyncinotify 4.4's `InitFlags.NONBLOCK` is O_CLOEXEC's value, not O_NONBLOCK.
        os.set_blocking(self._inotify.fd, False)
        self._folders: dict[Path, _Folder] = {}
        self._by_wd: dict[int, _Folder] = {}
        self.events_read = 0
        loop.add_reader(self._inotify.fd, self._read)

    def close(self) -> None:
        self.loop.remove_reader(self._inotify.fd)
        self._inotify.close()

    @contextmanager
    def subscription(self) -> Iterator[Subscription]:
        sub = Subscription(self)
        try:
            yield sub
        finally:
            sub.close()

    @property
    def watched_folders(self) -> int:
        return len(self._folders)

    # ----- folders -----

    def listen(
        self, path: Path, names: frozenset[str], wake: Callable[[], None], *, oneshot: bool
    ) -> _Listener | None:
        """Wake `wake` when one of `names` lands in the folder `path` (or it goes away); None
        when the folder cannot be watched (the caller looks on a timer)."""
        folder = self._folders.get(path)
        if folder is None:
            folder = _Folder(path, WRITE_MASK if oneshot else RECORD_MASK, oneshot)
            if not self._arm(folder):
                return None
            self._folders[path] = folder
        elif folder.oneshot != oneshot or not self.is_live(path):
            return None
        listener = _Listener(names, wake)
        folder.listeners.append(listener)
        return listener

    def unlisten(self, path: Path, listener: _Listener) -> None:
        folder = self._folders.get(path)
        if folder is None or listener not in folder.listeners:
            return
        folder.listeners.remove(listener)
        if folder.listeners:
            return
        del self._folders[path]
        if folder.rearm is not None:
            folder.rearm.cancel()
        self._drop_watch(folder)

    def is_live(self, path: Path) -> bool:
        """Whether the folder is watched (a one-shot one: or will be again on `ensure_armed`)."""
        folder = self._folders.get(path)
        return folder is not None and (folder.watch is not None or folder.oneshot)

    def ensure_armed(self, path: Path) -> bool:
        """A one-shot folder watched again (now, or once `REARM_SECONDS` have passed since it
        fired: then its listeners are woken to look again); False when it cannot be."""
        folder = self._folders.get(path)
        if folder is None:
            return False
        if folder.watch is not None or folder.rearm is not None or not folder.oneshot:
            return folder.watch is not None or folder.rearm is not None
        wait = folder.fired_at + REARM_SECONDS - time.monotonic()
        if wait > 0:
            folder.rearm = self.loop.call_later(wait, self._rearm_later, folder)
            return True
        return self._arm(folder)

    def _rearm_later(self, folder: _Folder) -> None:
        folder.rearm = None
        if self._folders.get(folder.path) is folder:
            self._arm(folder)
            self._wake(folder, None)

    def _arm(self, folder: _Folder) -> bool:
        mask = folder.mask | _ADD_FLAGS | (Mask.ONESHOT if folder.oneshot else Mask.ZERO)
        try:
            watch = self._inotify.add_watch(folder.path, mask)
        except OSError as error:
            log.debug("not watching %s: %s", folder.path, error)
            return False
        folder.watch = watch
        self._by_wd[watch.wd] = folder
        return True

    def _drop_watch(self, folder: _Folder) -> None:
        watch, folder.watch = folder.watch, None
        if watch is None:
            return
        self._by_wd.pop(watch.wd, None)
        self._forget(watch)

    def _forget(self, watch: Watch) -> None:
        try:
            self._inotify.rm_watch(watch)
        except OSError:
            pass  # the kernel dropped it already (the folder went away, a one-shot fired)

    # ----- reading -----

    def _read(self) -> None:
        for _ in range(READ_BUDGET):
            try:
                event = self._inotify.sync_get()
            except BlockingIOError:
                return
            if event is None:
                return
            self.events_read += 1
            if Mask.Q_OVERFLOW in event.mask:
                for folder in list(self._folders.values()):
                    self._wake(folder, None)
                continue
            watch = event.watch
            hit = self._by_wd.get(watch.wd) if watch is not None else None
            if watch is None or hit is None:
                continue
            if hit.oneshot or event.mask & _GONE:
                # The kernel dropped (or will drop) this watch: not watched until re-armed.
                self._by_wd.pop(watch.wd, None)
                hit.watch = None
                hit.fired_at = time.monotonic()
                if Mask.MOVE_SELF in event.mask and not hit.oneshot:
                    self._forget(watch)  # moved away (to the trash): the kernel keeps it
            gone = bool(event.mask & _GONE)
            if hit.oneshot and not gone and not self._named(hit, event.name):
                # Another file: nothing to look at yet, but writes until the watch is back
                # would go unseen, so the re-arm wakes the listeners to look.
                self.ensure_armed(hit.path)
                continue
            self._wake(hit, None if gone else event.name)

    def _named(self, folder: _Folder, name: Path | None) -> bool:
        return name is not None and any(str(name) in it.names for it in folder.listeners)

    def _wake(self, folder: _Folder, name: Path | None) -> None:
        for listener in list(folder.listeners):
            if name is None or str(name) in listener.names:
                listener.wake()

    # ----- processes -----

    def follow_pid(self, pid: int, start: str | None, wake: Callable[[], None]) -> int | None:
        """A pidfd of `pid` on the loop, waking `wake` when it ends (now, if it has ended or
        its pid now names a later process); None when no pidfd can be had."""
        if not self.use_pidfd:
            return None
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self.loop.call_soon(wake)
            return None
        except OSError as error:
            log.debug("no pidfd for %s: %s", pid, error)
            return None
        if start is not None and _start_time(pid) != start:
            os.close(fd)  # a later process took the pid: ours has ended
            self.loop.call_soon(wake)
            return None

        def ended() -> None:
            # Only stop reading: the fd stays open (its number ours) until its follower lets
            # go. Closing it here too closed it twice, the second time whatever socket or
            # pidfd had taken its number by then (seen: a loopback server's connection).
            self.loop.remove_reader(fd)
            wake()

        self.loop.add_reader(fd, ended)
        return fd

    def unfollow_pid(self, fd: int) -> None:
        """Let go of a pidfd `follow_pid` gave: once per fd, by its follower alone."""
        try:
            self.loop.remove_reader(fd)
        finally:
            os.close(fd)


class Subscription:
    """One watch's wake-ups: `clear`, look, then `wait`; anything that happened after `clear`
    ends the next `wait` at once."""

    def __init__(self, hub: WatchHub) -> None:
        self.hub = hub
        self._news = False
        self._waiter: asyncio.Future[None] | None = None
        self._listening: list[tuple[Path, _Listener]] = []
        self._pidfds: list[int] = []

    def wake(self) -> None:
        self._news = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def clear(self) -> None:
        self._news = False

    def follow_folder(self, path: Path, names: frozenset[str], *, oneshot: bool = False) -> bool:
        if any(p == path for p, _ in self._listening):
            return self.hub.ensure_armed(path) if oneshot else self.hub.is_live(path)
        listener = self.hub.listen(path, names, self.wake, oneshot=oneshot)
        if listener is None:
            return False
        self._listening.append((path, listener))
        return True

    def follow_pid(self, pid: int, start: str | None) -> bool:
        fd = self.hub.follow_pid(pid, start, self.wake)
        if fd is None:
            return self._news  # ended already (woken): nothing left to follow
        self._pidfds.append(fd)
        return True

    async def wait(self, timeout: float) -> None:
        if self._news or timeout <= 0:
            return
        waiter = self.hub.loop.create_future()
        self._waiter = waiter
        timer = self.hub.loop.call_later(timeout, _settle, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def close(self) -> None:
        for path, listener in self._listening:
            self.hub.unlisten(path, listener)
        self._listening.clear()
        for fd in self._pidfds:
            self.hub.unfollow_pid(fd)
        self._pidfds.clear()


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _start_time(pid: int) -> str | None:
    fields = local_ns.stat_fields(pid)
    return None if fields is None else fields[19]


_HUBS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WatchHub | None] = (
    weakref.WeakKeyDictionary()
)


def shared_hub() -> WatchHub | None:
    """The running loop's hub (made on first use), or None where inotify is not to be had
    (then local watches look on a timer, as before)."""
    loop = asyncio.get_running_loop()
    if loop in _HUBS:
        return _HUBS[loop]
    try:
        hub: WatchHub | None = WatchHub(loop)
    except (OSError, NotImplementedError, RuntimeError) as error:
        log.warning("local watches look on a timer: no inotify here (%s)", error)
        hub = None
    _HUBS[loop] = hub
    return hub
