"""How `RuntimeProvider` watches an agent: one held file-watch stream per run
(`activities.providers.runtime.watch` speaks the stream), news kept across a pause, and the
agent's exit read once its marker appears.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

import withruntime

from activities.models import SandboxInfo
from activities.providers.protocol import ProcessInfo, Sighting
from activities.providers.runtime import watch as watching
from activities.providers.runtime.convert import process_info, sandbox_info
from activities.providers.runtime.errors import runtime_call

# After its exit marker appears, an agent's process may take a moment to be reported ended.
EXIT_REPORT_TRIES = 25
EXIT_REPORT_PAUSE = 0.2


class RuntimeWatching:
    """Mixed into `RuntimeProvider` (which supplies `_client`, `_get`, `_handle`, `sandbox`
    and `_budget`)."""

    _budget: float

    if TYPE_CHECKING:

        def _client(self) -> withruntime.AsyncRuntime: ...

        async def _get(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

        def _handle(self, sandbox_id: str) -> withruntime.AsyncSandbox: ...

        async def sandbox(self, sandbox_id: str) -> SandboxInfo: ...

    async def watch(
        self,
        sandbox_id: str,
        process_id: str,
        checkpoint_path: str,
        *,
        token: str | None,
        wait_seconds: float,
        report_touch: bool = True,
    ) -> Sighting:
        running = SandboxInfo(sandbox_id=sandbox_id, state="running")
        alive = ProcessInfo(process_id=process_id, state="running")
        known = watching.WatchToken.decode(token)
        async with runtime_call(sandbox_id, self._budget + wait_seconds):
            if known is not None and known.pending:
                return await self._pending(sandbox_id, process_id, known)
            if known is None:
                # A new watch: look at the sandbox and the agent once, then follow the stream.
                sandbox = await self._get(sandbox_id)
                if sandbox.state != "running":
                    return Sighting(sandbox_info(sandbox.info), alive, False, None)
                fresh = await watching.start_watch(sandbox, checkpoint_path)
                process = await self._process_of(sandbox, process_id)
                return Sighting(sandbox_info(sandbox.info), process, True, fresh.encode())
            handle = watching.watch_handle(self._client().sandboxes._t, sandbox_id, known)
            try:
                news, after = await watching.next_news(
                    handle, checkpoint_path, wait_seconds, report_touch=report_touch
                )
            except withruntime.NotFoundError:
                # The watch is gone (it ended, or the sandbox did): start over next time.
                return Sighting(await self.sandbox(sandbox_id), alive, True, None)
            info = None
            if news.ended is None and not news.settled:
                # A short look (no stream followed): whether it still runs is not known; a
                # paused sandbox must not be taken for a running one. Ask, without waking.
                info = await self.sandbox(sandbox_id)
            if news.ended is not None or (info is not None and info.state != "running"):
                info = info or await self.sandbox(sandbox_id)
                paused = info.state == "paused"
                later = dataclasses.replace(after, pending=news.pending())
                process = await self._settled(sandbox_id, process_id, info)
                return Sighting(info, process, False, later.encode() if paused else None)
            process = alive
            if news.agent_exited:
                process = await self._exit_of(sandbox_id, process_id)
            return Sighting(info or running, process, news.checkpoint_touched, after.encode())

    async def _pending(
        self, sandbox_id: str, process_id: str, known: watching.WatchToken
    ) -> Sighting:
        """News read just before a pause: acted on once the sandbox runs again."""
        info = await self.sandbox(sandbox_id)
        if info.state != "running":
            return Sighting(
                info, await self._settled(sandbox_id, process_id, info), False, known.encode()
            )
        process = ProcessInfo(process_id=process_id, state="running")
        if "x" in known.pending:
            process = await self._exit_of(sandbox_id, process_id)
        done = dataclasses.replace(known, pending="")
        return Sighting(info, process, "t" in known.pending, done.encode())

    async def _process_of(self, sandbox: withruntime.AsyncSandbox, process_id: str) -> ProcessInfo:
        try:
            return process_info((await sandbox.process(process_id)).info)
        except (withruntime.NotFoundError, withruntime.ConflictError):
            return ProcessInfo(process_id=process_id, state="missing")

    async def _exit_of(self, sandbox_id: str, process_id: str) -> ProcessInfo:
        """The agent's process once its exit marker appeared: given a moment to be reported
        ended (the marker is written just before the wrapper exits)."""
        sandbox = self._handle(sandbox_id)
        for _ in range(EXIT_REPORT_TRIES):
            process = await self._process_of(sandbox, process_id)
            if process.state != "running":
                return process
            await asyncio.sleep(EXIT_REPORT_PAUSE)
        return process

    async def _settled(self, sandbox_id: str, process_id: str, info: SandboxInfo) -> ProcessInfo:
        """The agent of a sandbox that is no longer running, without waking it."""
        if info.state == "stopped":
            return ProcessInfo(process_id=process_id, state="killed")
        if info.state == "missing":
            return ProcessInfo(process_id=process_id, state="missing")
        # Paused: frozen with its sandbox, not asked (asking would wake it).
        return ProcessInfo(process_id=process_id, state="running")
