"""One coding-agent CLI process, for the adapter (`coding_agent.py`): started headless with the
session's command line, its prompt fed, its JSON lines and MCP calls handled as they come
(events: a session begun, a tool call begun or completed, text, a limit, retries, the result),
stopped at once when a step says so, its leftovers ended, its output drained, and how it ended
told as an `Outcome` (`coding_agent_record`) the run loop acts on.

MCP calls (`on_mcp`) are done in this thread, between the CLI's lines: the kit's requests file
has one writer.

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import coding_agent_leftovers as leftovers
    from overnight.agent_kit import coding_agent_system as system
    from overnight.agent_kit import overnight_agent as kit
    from overnight.agent_kit.coding_agent_record import Outcome
    from overnight.agent_kit.coding_agent_step import Steps
else:  # in the sandbox: sibling modules
    import clis
    import coding_agent_leftovers as leftovers
    import coding_agent_system as system
    import overnight_agent as kit
    from coding_agent_record import Outcome
    from coding_agent_step import Steps

# The CLI exited: its output's end is awaited this long before its leftovers are ended (one
# may hold the pipe: Claude Code's tool shells do), and as long again after.
EXIT_GRACE_SECONDS = 0.05
DRAIN_SECONDS = 1.0


class CliProcess(Steps):
    """One CLI process at a time: run, watched, ended, told."""

    # --- the process ---

    def run_cli(self, mode: str, prompt: str) -> Outcome:
        self._reset_process_state()
        self.cli.started()
        session = self.session_id
        if mode == "resume":
            argv = self.cli.resume(session, self.config.model, self.config.max_turns)
        else:
            argv = self.cli.new_session(session, self.config.model, self.config.max_turns)
        self._open_session_lines(session, mode)
        number = int(self.state.get("processes", 0)) + 1
        self.state["processes"] = number
        self.process_tag = f"out{number}"
        self.log("cli_started", mode=mode, session=session, argv=argv[1:], process=number)
        started = time.monotonic()
        process = subprocess.Popen(
            argv,
            cwd=self.config.cwd,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        threading.Thread(target=_feed, args=(process.stdin, prompt), daemon=True).start()
        system.LineReader(process.stdout, self.inbox, tag=self.process_tag).start()
        stderr = system.TailReader(process.stderr, sys.stderr)
        stderr.start()
        eof = self._pump(process)
        # Its leftovers ended while its zombie is held, then reaped: see leftovers.end_cli.
        ended = leftovers.end_cli(process, self.git.running)
        returncode = process.wait()
        self.process = None
        if not eof:
            self._drain(time.monotonic() + DRAIN_SECONDS)
        self._read_session()
        self._store_session()
        self.report_spend()
        outcome = self._outcome(returncode, stderr.tail())
        outcome.leftovers = ended
        self.log(
            "cli_ended",
            process=number,
            returncode=returncode,
            outcome=outcome.kind,
            text=clis.clip(outcome.text, 300),
            leftovers=ended,
            seconds=round(time.monotonic() - started, 3),
        )
        self.save()
        return outcome

    def _pump(self, process: subprocess.Popen[bytes]) -> bool:
        """Handle what comes until the CLI's output ends (True) or it exited and its output
        did not end within the grace (False: an orphan holds the pipe)."""
        exited_at: float | None = None
        stopping = False
        while True:
            try:
                item = self.inbox.get(timeout=0.05 if exited_at else 0.2)
            except queue.Empty:
                item = None
            if item is not None:
                if item[0] == "eof" and item[1] == self.process_tag:
                    return True
                self._handle(item)
            self._look_at_session()
            if self.stop_reason and not stopping:
                stopping = True  # at once: given a SIGTERM, Claude Code goes on for a while
                leftovers.kill_group(process.pid)
            if leftovers.exited(process.pid):  # not reaped: end_cli needs its zombie
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at >= EXIT_GRACE_SECONDS:
                    return False

    def _drain(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                item = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if item[0] == "eof" and item[1] == self.process_tag:
                return
            self._handle(item)

    def _handle(self, item: tuple[Any, ...]) -> None:
        if item[0] == "mcp":
            self.on_mcp(item[1], item[2])
        elif item[0] == self.process_tag:
            for event in self.cli.parse(item[1]):
                self.on_event(event)

    def _outcome(self, returncode: int, stderr_tail: str) -> Outcome:
        finished = self.finished
        if not self.stop_reason:
            finished = self.cli.process_ended(returncode, stderr_tail, finished)
        if self.stop_reason:
            outcome = Outcome(self.stop_reason, returncode=returncode)
        elif finished is not None and (finished.outcome != clis.SUCCESS or returncode == 0):
            outcome = Outcome(finished.outcome, finished.text, returncode)
            outcome.resets_at = finished.resets_at
            outcome.status = finished.status
        elif finished is not None:
            outcome = Outcome(clis.ERROR, f"a success result, but exit {returncode}", returncode)
        else:
            how = f"killed by signal {-returncode}" if returncode < 0 else f"exited {returncode}"
            tail = stderr_tail.strip().splitlines()
            outcome = Outcome("crash", how + (f": {tail[-1]}" if tail else ""), returncode)
        if outcome.kind == clis.USAGE_LIMIT and self.cli.resets_at is not None:
            outcome.resets_at = self.cli.resets_at  # exact, where its text is a clock time
        outcome.during = self.running_label
        return outcome

    # --- events ---

    def on_event(self, event: clis.Event) -> None:
        self.cli.counted(event, self.session_id)
        if isinstance(event, clis.SessionStarted):
            self._session_started(event.session_id)
        elif isinstance(event, clis.ToolStarted):
            if event.call_id in self.pending:
                return
            self.pending[event.call_id] = event
            self.running_label = event.label
            self.save(f"running {event.label}")
        elif isinstance(event, clis.ToolFinished):
            started = self.pending.pop(event.call_id, None)
            if started is None:
                started = clis.ToolStarted(event.call_id, "?", event.call_id, "a tool call")
            self.running_label = ""
            self.step(started, event.is_error)
        elif isinstance(event, clis.AssistantText):
            if event.text.strip():
                self.last_text = event.text
                self.note(f"said: {event.text}")
        elif isinstance(event, clis.LimitHit):
            self.limit = event
        elif isinstance(event, clis.Retrying):
            if time.monotonic() - self.last_retry_save > 5:
                self.last_retry_save = time.monotonic()
                if event.status.isdigit():  # the model API answered: it is there, and says wait
                    self.waited_as_told()
                self.save(
                    f"model API {event.status}: the CLI retries ({event.attempt}/{event.most})"
                )
        elif isinstance(event, clis.Finished):
            self.finished = event

    # --- MCP calls (in this thread: the kit's requests file has one writer) ---

    def on_mcp(self, request: dict[str, Any], reply: Callable[[bool, str], None]) -> None:
        tool = request.get("tool")
        arguments = request.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        self.log("mcp", tool=tool)
        try:
            if tool == "ask_person":
                question = str(arguments.get("question") or "")
                choices = arguments.get("choices")
                choices = [str(c) for c in choices] if isinstance(choices, list) else None
                self.note(f"asks: {question}")
                self.save(f"waiting for an answer: {question}")
                answer = kit.ask(question, choices)
                self.note(f"answered: {answer}")
                self.save("working")
                reply(True, answer)
            elif tool == "wait_until":
                when: Any = arguments.get("when")
                if isinstance(when, str) and when.strip().replace(".", "", 1).isdigit():
                    when = float(when)
                reason = str(arguments.get("reason") or "asked by the agent")
                self.save(f"waiting until {when}: {reason}")
                came = kit.wait_until(when, reason)
                self.save("working")
                reply(True, "the time came" if came else "woken before the time by overnight")
            elif tool == "report_progress":
                if arguments.get("next"):
                    self.checkpoint.next = clis.clip(str(arguments["next"]), 200)
                if arguments.get("note"):
                    self.note(str(arguments["note"]))
                self.save()
                reply(True, "noted")
            else:
                reply(False, f"no such tool: {tool}")
        except (ValueError, TypeError) as error:
            reply(False, f"refused: {error}")


def _feed(stdin: Any, text: str) -> None:
    try:
        stdin.write(text.encode("utf-8"))
    except OSError:
        pass
    finally:
        try:
            stdin.close()
        except OSError:
            pass
