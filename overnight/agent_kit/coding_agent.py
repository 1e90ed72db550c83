"""overnight's coding-agent adapter: a coding-agent CLI (Claude Code, Codex) as a run's agent,
supervised.

    python3 /workspace/.overnight/kit/coding_agent.py \
        --config /workspace/.overnight/coding-agent.json

It runs in the sandbox as the run's agent and starts the CLI (its native binary, `cli` in the
config) as its child, headless, reading the CLI's JSON lines as they come. Standard library
only, Python 3.8 or newer, like the kit it speaks to the supervisor through
(`overnight_agent`: `Checkpoint`, `ask`, `wait_until`, `report_usage`, `finish`,
`fresh_context`). Its sibling modules: `clis` (one package per CLI kind: what is particular
to each, its spend included, and the table of them), `coding_agent_system` (processes, git,
files), `coding_agent_mcp` (the MCP server the CLI is given, and its relay to this process).

**The config** (JSON): `kind` (a kind in `clis.CLIS`: `claude-code`, `codex`), `prompt`,
`model` ("" = the CLI's default), `max_turns` (0 = none), `base_url` ("" = the vendor's), `cli`
(the native binary's absolute path), `run_id`, `branch` (checked out in `cwd`), `cwd`,
`checkpoint_path`, `loop_repeats` (8), `prices` (`{model: {input_per_mtok, output_per_mtok,
cached_input_per_mtok}}`), `usage_backoff_seconds` (900), `api_backoff_seconds` ([30, 60, 120,
300, 600]) and `session_store` (optional: a folder outside the sandbox where the CLI's session
files are copied after each step and restored from at start). Credentials come in the
environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`,
`OPENAI_API_KEY`).

**What it does**
- After every completed tool call: the workspace's changes committed (`step N: <call>`, none
  when nothing changed), a checkpoint (step, `next`, `notes`, the session id, HEAD), the spend
  reported, the session file copied to the store, HEAD pushed to the run's branch on origin
  (in a thread; a failed push is said and retried at the next step, never fatal).
- A usage limit with a reset time: the kit's `wait_until(reset)` (the sandbox paused), then the
  same session resumed; without one, the configured backoff, said in `next`. A 429/529 after
  the CLI's own retries: a backoff, then the same session. Neither ends the adapter.
- The CLI killed or crashed: the processes it left ended, the same session resumed in place
  (`--resume ID`, `codex exec resume ID`).
- Started with a checkpoint whose session is open: that session resumed (its file restored
  from the store when the sandbox is new); when its file cannot be had, a new session seeded
  from the checkpoint (the task, the notes, `git log --oneline`), said in the notes.

**Exit codes**: 0 done (the CLI's success result, then the kit's `finish` with the branch and
its last commit; an error result is never taken for done); 75 (the run's fresh-context code)
when `max_turns` is met or the context is full: the next start is a new session seeded from
the checkpoint; 76 (`LOOP_EXIT_CODE`) when the same tool call with the same input came
`loop_repeats` times in a row, with a note naming it ("loop: Bash `pytest -q` 8 times in a
row"); 2 a config it cannot run (one line says why); 1 when the CLI failed 5 times in a row
without completing a tool call.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import coding_agent_mcp as mcp
    from overnight.agent_kit import coding_agent_system as system
    from overnight.agent_kit import overnight_agent as kit
else:  # in the sandbox: the kit's folder, where this file is
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import clis
    import coding_agent_mcp as mcp
    import coding_agent_system as system
    import overnight_agent as kit

LOOP_EXIT_CODE = 76  # overnight.agent_spec.LOOP_EXIT_CODE
CONFIG_EXIT_CODE = 2
FAILED_EXIT_CODE = 1
MAX_FAILURES = 5  # CLI failures in a row with no tool call completed: the adapter gives up
MAX_NOTES = 40
# Its word on its work, in the checkpoint (overnight.checkpoint_text.PROGRESS_KEY).
PROGRESS_MARK = "progress_mark"
NOTE_CHARS = 300
RESUME_PROMPT = "continue"
# A CLI "finishes" by ending its turn, not by exiting: the done check's failure is told so
# (the kit's file says "exit 0", which is for agents written on the kit).
DONE_CHECK_LEAD = (
    "(From overnight, which supervises this run.) When you ended your last turn, overnight ran "
    "the done check below, and it failed: the task is not finished yet. Fix what it reports, "
    "then end your turn again; overnight runs every check again."
)
DEFAULT_API_BACKOFF = [30.0, 60.0, 120.0, 300.0, 600.0]
# The CLI exited: its output's end is awaited this long before its leftovers are ended (one
# may hold the pipe: Claude Code's tool shells do), and as long again after.
EXIT_GRACE_SECONDS = 0.05
DRAIN_SECONDS = 1.0
# How often the session file is looked at while a tool call runs (the CLI writes it late).
SESSION_LOOK_SECONDS = 1.0


class ConfigError(Exception):
    """The config cannot be run; the message says why."""


class Config:
    def __init__(self, values: dict[str, Any], path: str) -> None:
        def text(name: str, default: str = "") -> str:
            value = values.get(name, default)
            if value is None:
                return default
            if not isinstance(value, str):
                raise ConfigError(f"{name} must be text, not {type(value).__name__}")
            return value

        def number(name: str, default: float, least: float = 0) -> float:
            value = values.get(name, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < least:
                raise ConfigError(f"{name} must be a number >= {least:g}")
            return float(value)

        self.path = path
        self.kind = text("kind")
        if self.kind not in clis.CLIS:
            raise ConfigError(f"kind must be one of {', '.join(clis.CLIS)}, not {self.kind!r}")
        self.prompt = text("prompt")
        if not self.prompt.strip():
            raise ConfigError("prompt is empty")
        self.model = text("model")
        self.max_turns = int(number("max_turns", 0))
        self.base_url = text("base_url")
        self.cli = text("cli")
        if not os.path.isabs(self.cli) or not os.access(self.cli, os.X_OK):
            raise ConfigError(f"the {self.kind} CLI is not an executable at {self.cli!r}")
        self.run_id = text("run_id") or kit.run_id()
        self.cwd = text("cwd") or os.getcwd()
        if not os.path.isdir(self.cwd):
            raise ConfigError(f"cwd {self.cwd!r} is not a folder")
        self.branch = text("branch") or f"agent/{self.run_id}"
        self.checkpoint_path = text("checkpoint_path") or kit.checkpoint_path()
        self.loop_repeats = int(number("loop_repeats", 8, least=2))
        prices = values.get("prices") or {}
        if not isinstance(prices, dict):
            raise ConfigError("prices must be an object of models")
        self.prices: dict[str, Any] = prices
        self.usage_backoff_seconds = number("usage_backoff_seconds", 900)
        backoff = values.get("api_backoff_seconds", DEFAULT_API_BACKOFF)
        if (
            not isinstance(backoff, list)
            or not backoff
            or not all(isinstance(v, (int, float)) and v >= 0 for v in backoff)
        ):
            raise ConfigError("api_backoff_seconds must be a list of seconds")
        self.api_backoff_seconds = [float(v) for v in backoff]
        self.session_store = text("session_store")

    @classmethod
    def load(cls, path: str) -> Config:
        try:
            with open(path, encoding="utf-8") as source:
                values = json.load(source)
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read the config {path}: {error}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"the config {path} is not a JSON object")
        return cls(values, path)


class Outcome:
    """How one CLI process ended: `kind` is a `clis` outcome, or "crash", "loop"."""

    def __init__(self, kind: str, text: str = "", returncode: int | None = None) -> None:
        self.kind = kind
        self.text = text
        self.returncode = returncode
        self.resets_at: float | None = None
        self.status: int | None = None
        self.during = ""  # the tool call it was in when it ended
        self.leftovers: list[str] = []


def utc_clock(epoch: float, seconds: bool = False) -> str:
    moment = _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc)  # noqa: UP017 (Python 3.8)
    return moment.strftime("%H:%M:%S" if seconds else "%H:%M")


class Adapter:
    def __init__(self, config: Config) -> None:
        self.config = config
        os.environ["OVERNIGHT_CHECKPOINT"] = config.checkpoint_path  # the kit's requests beside it
        self.state_dir = os.path.join(os.path.dirname(os.path.abspath(config.path)), "coding-agent")
        os.makedirs(self.state_dir, exist_ok=True)
        self.log_path = os.path.join(self.state_dir, "log.jsonl")
        self.checkpoint = kit.Checkpoint.load(config.checkpoint_path)
        state = self.checkpoint.data.get("coding_agent")
        self.state: dict[str, Any] = state if isinstance(state, dict) else {}
        self.checkpoint.data["coding_agent"] = self.state
        self.env = dict(os.environ)
        self.cli: clis.Cli = clis.CLIS[config.kind](config.cli, config.cwd, self.env)
        self.git = system.Git(config.cwd)
        self.pusher = system.Pusher(self.git, config.branch, self._push_failed)
        self.has_origin = self.git.has_origin()
        self.head = self.git.head() if self.git.is_repo else ""
        if self.has_origin:
            self.pusher.start()
        self.spend = self.cli.count_spend(
            os.path.join(self.state_dir, "spend.json"), config.prices, config.model
        )
        self.store = (
            system.SessionStore(config.session_store, self.cli.session_home)
            if config.session_store
            else None
        )
        self.inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        # A Unix socket's path is short (108 bytes): under /tmp, whatever TMPDIR says.
        self.socket_dir = tempfile.mkdtemp(
            prefix="ovn-mcp-", dir="/tmp" if os.path.isdir("/tmp") else None
        )
        self.relay = mcp.Relay(os.path.join(self.socket_dir, "relay.sock"), self.inbox)
        self.relay.start()
        mcp_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "coding_agent_mcp.py")
        self.cli.settings(
            config.base_url,
            [sys.executable or "python3", mcp_script, "--socket", self.relay.path],
            self.state_dir,
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.process_tag = ""
        self.digest = system.GrowingDigest()
        self.session_lines: system.JsonLines | None = None
        self.reported: tuple[float, int, int] | None = None
        self.said: set[str] = set()  # notes said once
        self._reset_process_state()

    # --- notes, checkpoint, log ---

    def note(self, text: str) -> None:
        text = clis.clip(text, NOTE_CHARS)
        self.checkpoint.note(text)
        del self.checkpoint.notes[:-MAX_NOTES]
        print(f"[coding-agent] {text}", flush=True)
        self.log("note", text=text)

    def note_once(self, key: str, text: str) -> None:
        if key not in self.said:
            self.said.add(key)
            self.note(text)

    def log(self, event: str, **values: Any) -> None:
        line = json.dumps({"at": round(time.time(), 3), "event": event, **values}, default=str)
        try:
            with open(self.log_path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
        except OSError:
            pass

    def save(self, next_step: str | None = None) -> None:
        if next_step is not None:
            self.checkpoint.next = clis.clip(next_step, 200)
        data = self.checkpoint.data
        data["agent"] = self.config.kind
        data["session_id"] = self.state.get("session_id")
        data["branch"] = self.config.branch
        data["head"] = self.head
        data[PROGRESS_MARK] = self.work_mark()
        self.checkpoint.save()

    def work_mark(self) -> dict[str, Any]:
        """What changes only with new work: the tool calls done, the commit, the tokens the
        model answered with (a new turn; its transcript grows with every try too), a session
        ended; and the waits the model API asked for. Not the notes and `next`, which change
        as the CLI retries a model API it cannot reach: the supervisor counts a checkpoint as
        progress only when this changed, so such a run meets its stall and restarts (a new
        sandbox, a new way to the gateway)."""
        return {
            "step": self.checkpoint.step,
            "head": self.head,
            "tokens": sum(self.reported[1:]) if self.reported else 0,
            "ended": self.state.get("ended"),
            "waits": self.state.get("waits", 0),
        }

    def waited_as_told(self) -> None:
        """A save made while waiting as the model API said to (a usage limit, a 429 or 529, a
        5xx the gateway passed on after its own retries): the API is there and the wait is
        its, so it is no stall. A restart would not end it, and a person could not either; the
        status says the API's trouble. Only a model API the CLI cannot reach at all (no
        answer: the sandbox lost its way to the gateway) lets the stall come."""
        self.state["waits"] = int(self.state.get("waits", 0)) + 1

    def _push_failed(self, text: str) -> None:
        self.log("push_failed", error=text)

    @property
    def session_id(self) -> str:
        return str(self.state.get("session_id") or "")

    # --- the run ---

    def run(self) -> int:
        if not system.become_subreaper():
            self.note_once(
                "subreaper", "cannot be the subreaper: a killed CLI's tools may outlive it"
            )
        home = self.env.get("HOME", "")
        if home and not os.access(home, os.W_OK):
            self.note(f"HOME ({home}) is not writable: the CLI keeps no session to resume")
        mode, prompt = self.plan()
        failures = api_failures = limit_hits = 0
        while True:
            steps_before = self.checkpoint.step
            outcome = self.run_cli(mode, prompt)
            if self.checkpoint.step > steps_before:
                failures = api_failures = limit_hits = 0
            kind = outcome.kind
            if kind == clis.SUCCESS:
                return self.done(outcome)
            if kind in (clis.MAX_TURNS, clis.CONTEXT_FULL):
                self.fresh(outcome)  # exits 75
            if kind == "loop":
                return self.looped()
            mode, prompt = "resume", RESUME_PROMPT
            if kind == clis.USAGE_LIMIT:
                limit_hits += 1
                self.wait_for_limit(outcome, limit_hits)
            elif kind == clis.API_ERROR:
                api_failures += 1
                self.back_off(outcome, api_failures)
            elif kind == clis.SESSION_MISSING:
                self.note(f"the CLI cannot find session {self.session_id}: a new session")
                self.state["session_open"] = False
                mode, prompt = self.plan()
            else:
                failures += 1
                if failures >= MAX_FAILURES:
                    self.note(
                        f"the CLI failed {failures} times in a row with no tool call done; "
                        f"last: {clis.clip(outcome.text, 200)}"
                    )
                    self.save("failed: the CLI keeps failing")
                    self.flush_push()
                    return FAILED_EXIT_CODE
                self.after_failure(outcome, failures)
            if not self._session_resumable():  # it never began: begin it again
                mode, prompt = self.plan(again=True)

    def _session_resumable(self) -> bool:
        session = self.session_id
        return bool(session) and os.path.exists(self.cli.session_file(session))

    def plan(self, again: bool = False) -> tuple[str, str]:
        """How to start the CLI: resume the checkpoint's open session when its transcript is
        here (or in the store), else a new session (seeded from the checkpoint when it holds
        work). ("resume" | "new", the prompt)."""
        state = self.state
        if state.get("kind") not in (None, self.config.kind):
            self.note(f"the checkpoint's session is {state.get('kind')}'s: a new session")
            state["session_open"] = False
        state["kind"] = self.config.kind
        session = self.session_id if state.get("session_open") else ""
        if session and not again:
            path = self.cli.session_file(session)
            where = ""
            if not os.path.exists(path) and self.store is not None:
                where = self._restore(session)
                path = self.cli.session_file(session)
            if os.path.exists(path):
                self._check_digest(path)
                restarted = kit.restart_reason()
                self.note(
                    f"resuming session {session}{where}" + (f" ({restarted})" if restarted else "")
                )
                self.save(f"resuming session {session}")
                prompt = RESUME_PROMPT + (
                    f" (overnight restarted you: {restarted})" if restarted else ""
                )
                return "resume", self.done_check_prompt() or prompt
            kept = " nor in the session store" if self.store is not None else ""
            self.note(
                f"session {session} cannot be resumed: its transcript is not in this sandbox"
                f"{kept}; a new session seeded from the checkpoint"
            )
            state["session_open"] = False
        if again and session:
            new_id = session  # it never started: the same id again (Claude Code)
        else:
            new_id = self.cli.new_session_id() or ""
        earlier = [s for s in state.get("sessions") or [] if s != new_id]
        seeded = self.checkpoint.step > 0 or bool(earlier) or bool(state.get("ended"))
        state["session_id"] = new_id or None
        state["session_open"] = True
        if new_id and new_id not in state.setdefault("sessions", []):
            state["sessions"].append(new_id)
        if not again:
            if seeded:
                self.note(f"a new session seeded from the checkpoint (step {self.checkpoint.step})")
            else:
                self.note("a new session")
        self.save("starting the CLI")
        prompt = self.seeded_prompt() if seeded else self.config.prompt
        failure = self.done_check_prompt()
        return "new", f"{prompt}\n\n---\n{failure}" if failure else prompt

    def done_check_prompt(self) -> str:
        """Started again for a failed done check: the failure, as the next prompt ("": not)."""
        failure = kit.done_check_failure()
        if failure is None:
            return ""
        self.note_once("done-check", f"{clis.clip(kit.restart_reason(), 200)}: told the CLI")
        lines = failure.splitlines()
        first = next((i for i, line in enumerate(lines) if line.startswith("command: ")), None)
        return failure if first is None else "\n".join([DONE_CHECK_LEAD, "", *lines[first:]])

    def seeded_prompt(self) -> str:
        cp = self.checkpoint
        ended = self.state.get("ended") or "its transcript is lost"
        lines = [
            self.config.prompt,
            "",
            "---",
            "(From overnight, which supervises this run.) This task was begun in an earlier "
            f"session that cannot be continued ({ended}). What was done so far:",
            f"- tool calls completed: {cp.step}",
        ]
        if cp.notes:
            lines.append("- notes, oldest first:")
            lines += [f"  - {note}" for note in cp.notes[-15:]]
        log = self.git.log_oneline(30) if self.git.is_repo else ""
        if log:
            lines.append(f"- commits on the branch {self.config.branch} (git log --oneline):")
            lines += [f"  {line}" for line in log.splitlines()]
        lines += [
            "",
            "The work so far is in this working tree and its commits. Continue the task from "
            "there; do not redo what is done.",
        ]
        return "\n".join(lines)

    def _restore(self, session: str) -> str:
        assert self.store is not None
        found = self.store.find(self.cli.store_match(session))
        for relative in found:
            problem = self.store.restore(relative, self.cli.restored_path(relative))
            if problem:
                self.note(problem)
                return ""
        return " (its transcript restored from the session store)" if found else ""

    def _check_digest(self, path: str) -> None:
        kept = self.state.get("session_file")
        if not isinstance(kept, dict) or not kept.get("bytes"):
            return
        size = os.path.getsize(path)
        if size < int(kept["bytes"]):
            self.note(
                f"the session's transcript has {size} bytes, {kept['bytes']} at the checkpoint: "
                "resuming what there is (the steps after it may be redone)"
            )

    # --- one CLI process ---

    def _reset_process_state(self) -> None:
        self.pending: dict[str, clis.ToolStarted] = {}
        self.running_label = ""
        self.finished: clis.Finished | None = None
        self.limit: clis.LimitHit | None = None
        self.stop_reason = ""
        self.steps_in_process = 0
        self.last_text = ""
        self.last_retry_save = 0.0
        self.next_session_look = 0.0

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
        # Its leftovers ended while its zombie is held, then reaped: see system.end_cli.
        ended = system.end_cli(process, self.git.running)
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

    def _open_session_lines(self, session: str, mode: str) -> None:
        self.session_lines = None
        path = self.cli.session_file(session) if session else ""
        offset = os.path.getsize(path) if path and os.path.exists(path) else 0
        if path:
            self.session_lines = system.JsonLines(path, offset, self.cli.session_needles)
        self.cli.process_starting(session, mode, path)

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
                system.kill_group(process.pid)
            if system.exited(process.pid):  # not reaped: end_cli needs its zombie
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

    def _session_started(self, session: str) -> None:
        if session == self.session_id:
            return
        known = self.session_id
        if known and self.cli.takes_session_ids:
            self.note(f"the CLI started session {session}, not {known}")
        self.state["session_id"] = session
        self.state["session_open"] = True
        if session not in self.state.setdefault("sessions", []):
            self.state["sessions"].append(session)
        self.cli.session_started(session)
        self.session_lines = None
        self.save("working")

    def step(self, call: clis.ToolStarted, failed: bool) -> None:
        """A tool call completed: commit, checkpoint, spend, store, push."""
        cp = self.checkpoint
        cp.step += 1
        self.steps_in_process += 1
        loop = self.state.get("loop")
        if self.stop_reason:
            pass  # stopping already (a call the CLI did meanwhile): the loop is as it was found
        elif isinstance(loop, dict) and loop.get("key") == call.key:
            loop["count"] = int(loop.get("count", 0)) + 1
        else:
            loop = {"key": call.key, "label": call.label, "count": 1}
        self.state["loop"] = loop
        committed, problem = self.git.commit_all(f"step {cp.step}: {call.label}")
        if problem:
            self.note_once(problem[:20], f"step {cp.step}: {problem}")
        if committed:
            self.head = self.git.head()
        self._read_session()
        self._store_session()
        self.report_spend()
        self.save(f"working (last: {call.label})")
        if self.has_origin:
            self.pusher.want()
        head = self.head
        self.log(
            "step",
            step=cp.step,
            label=call.label,
            failed=failed,
            committed=committed,
            head=head,
            session=self.session_id,
        )
        print(
            f"[coding-agent] step {cp.step}: {call.label}{' (failed)' if failed else ''}"
            f"{'; committed ' + head[:10] if committed else ''}",
            flush=True,
        )
        if self.stop_reason:
            return
        if isinstance(loop, dict) and int(loop["count"]) >= self.config.loop_repeats:
            self.stop_reason = "loop"
        elif (
            self.cli.counts_turns
            and self.config.max_turns
            and self.steps_in_process >= self.config.max_turns
        ):
            self.stop_reason = clis.MAX_TURNS

    def _read_session(self) -> None:
        """New lines of the session file, for the kind to read (spend, limits)."""
        if self.session_lines is None and self.session_id:
            path = self.cli.session_file(self.session_id)
            if path and os.path.exists(path):
                self.session_lines = system.JsonLines(path, 0, self.cli.session_needles)
        if self.session_lines is None:
            return
        self.cli.session_lines(self.session_lines.new(), self.session_id)

    def _look_at_session(self) -> None:
        """While a tool call runs, store the session file again when it grew since the
        checkpoint named it: Claude Code writes its transcript a moment late, at times only
        once the next call runs, and a sandbox lost during a long call must still carry the
        steps before it. (Between calls the file grows with each answer: the step stores it.)"""
        now = time.monotonic()
        if not self.pending or now < self.next_session_look or not self.session_id:
            return
        self.next_session_look = now + SESSION_LOOK_SECONDS
        path = self.cli.session_file(self.session_id)
        kept = self.state.get("session_file")
        try:
            size = os.path.getsize(path) if path else 0
        except OSError:
            return
        if size and not (isinstance(kept, dict) and kept.get("bytes") == size):
            self._store_session()
            self.save()

    def _store_session(self) -> None:
        if not self.session_id:
            return
        path = self.cli.session_file(self.session_id)
        if not path or not os.path.exists(path):
            return
        size, digest = self.digest.update(path)
        self.state["session_file"] = {
            "path": os.path.relpath(path, self.cli.session_home),
            "bytes": size,
            "sha256": digest,
        }
        if self.store is not None:
            problem = self.store.save(path)
            if problem:
                self.note_once("store", problem)

    def report_spend(self) -> None:
        usd, tokens_in, tokens_out = self.spend.total()
        for model in sorted(self.spend.unpriced):
            self.note_once(
                f"price-{model}", f"no price for {model}: its tokens are reported, at $0"
            )
        if self.reported != (usd, tokens_in, tokens_out):
            self.reported = (usd, tokens_in, tokens_out)
            kit.report_usage(usd, tokens_in, tokens_out, self.spend.main_model())
            self.spend.save()

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

    # --- the ways out, and the waits ---

    def final_commit(self, message: str) -> str:
        committed, problem = self.git.commit_all(message)
        if problem:
            self.note_once(problem[:20], problem)
        if committed:
            self.head = self.git.head()
        return self.head

    def flush_push(self) -> None:
        if not self.has_origin:
            return
        self.pusher.want()
        if not self.pusher.flush(300):
            self.note("the last push did not end in 300 s")
        elif self.pusher.last_error:
            self.note(f"the last push failed: {self.pusher.last_error}")

    def done(self, outcome: Outcome) -> int:
        summary = outcome.text.strip() or self.last_text.strip() or "done"
        head = self.final_commit(f"step {self.checkpoint.step}: done")
        self.flush_push()
        self.note(f"done: {summary}")
        self.save("done")
        self.report_spend()
        outputs = {"branch": self.config.branch, "commit": head}
        kit.finish(summary, outputs)
        self.log("finished", outputs=outputs)
        return 0

    def fresh(self, outcome: Outcome) -> NoReturn:
        if outcome.kind == clis.MAX_TURNS:
            why = f"max turns ({self.config.max_turns}) reached"
        else:
            why = "the context window is full"
        self.state["session_open"] = False
        self.state["ended"] = why
        self.final_commit(f"step {self.checkpoint.step}: {why}")
        self.flush_push()
        self.report_spend()
        self.save(f"{why}: a fresh session next, seeded from this checkpoint")
        self.log("fresh_context", why=why)
        kit.fresh_context(
            f"{why} in session {self.session_id} after {self.checkpoint.step} tool calls: "
            "a new session continues from this checkpoint",
            self.checkpoint,
        )

    def looped(self) -> int:
        loop = self.state.get("loop") or {}
        text = f"loop: {loop.get('label', '?')} {loop.get('count', '?')} times in a row"
        self.state["session_open"] = False
        self.state["ended"] = text
        self.state["loop"] = None
        self.final_commit(f"step {self.checkpoint.step}: stopped ({text})")
        self.flush_push()
        self.report_spend()
        self.note(text)  # the last note: overnight names the restart by it
        self.save(f"{text}: a fresh session next, seeded from this checkpoint")
        self.log("loop", text=text)
        return LOOP_EXIT_CODE

    def wait_for_limit(self, outcome: Outcome, hits: int) -> None:
        resets = outcome.resets_at
        now = time.time()
        session = self.session_id
        if resets is not None and resets > now + 1:
            stamp = utc_clock(resets)
            self.note(f"usage limit: waiting until {stamp} UTC, then resuming session {session}")
            self.waited_as_told()
            self.save(f"usage limit: waiting until {stamp} UTC")
            self.log("usage_limit", resets_at=resets)
            came = kit.wait_until(resets, f"{self.config.kind} usage limit resets at {stamp} UTC")
            if not came:
                self.note("woken before the usage limit's reset: resuming")
        else:
            delay = self.config.usage_backoff_seconds
            until = now + delay
            self.note(
                f"usage limit with no reset time: retrying at {utc_clock(until)} UTC"
                f" ({clis.clip(outcome.text, 120)})"
            )
            self.log("usage_limit", resets_at=None, retry_at=until)
            self.sleep(delay, "usage limit: retrying at {at} UTC", until, as_told=True)
        if hits > 1:  # limited again at once: do not hammer the API
            floor = min(self.config.usage_backoff_seconds, 5.0 * 2 ** (hits - 2))
            self.sleep(
                floor, "usage limit again: retrying at {at} UTC", time.time() + floor, as_told=True
            )

    def back_off(self, outcome: Outcome, failures: int) -> None:
        steps = self.config.api_backoff_seconds
        delay = steps[min(failures - 1, len(steps) - 1)]
        until = time.time() + delay
        status = outcome.status or "error"
        self.note(
            f"model API {status} after the CLI's own retries: resuming session "
            f"{self.session_id} at {utc_clock(until, True)} UTC"
        )
        self.log("api_backoff", status=outcome.status, seconds=delay)
        self.sleep(
            delay,
            f"model API {status}: resuming at {{at}} UTC",
            until,
            seconds_shown=True,
            as_told=outcome.status is not None,  # it answered; None: it could not be reached
        )

    def after_failure(self, outcome: Outcome, failures: int) -> None:
        during = f" during {outcome.during}" if outcome.during else ""
        ended = f"; ended what it left: {', '.join(outcome.leftovers)}" if outcome.leftovers else ""
        what = "crashed" if outcome.kind == "crash" else "failed"
        self.note(
            f"the CLI {what} ({clis.clip(outcome.text, 160)}){during}{ended}; "
            f"resuming session {self.session_id}"
        )
        if failures > 1:  # again at once: the backoff steps of an API error
            steps = self.config.api_backoff_seconds
            delay = steps[min(failures - 2, len(steps) - 1)]
            self.sleep(delay, "the CLI failed again: resuming at {at} UTC", time.time() + delay)

    def sleep(
        self,
        seconds: float,
        status: str,
        until: float,
        seconds_shown: bool = False,
        as_told: bool = False,
    ) -> None:
        """Sleep `seconds`, saying `status` (with {at}) in `next`, refreshed each minute;
        `as_told`: a wait the model API asked for (`waited_as_told`)."""
        shown = seconds_shown or seconds < 120
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            text = status.format(at=utc_clock(until, shown))
            if left > 90:
                text += f" ({int(left // 60)} min left)"
            if as_told:
                self.waited_as_told()
            self.save(text)
            time.sleep(min(left, 60.0))

    # --- the end ---

    def close(self) -> None:
        process = self.process
        if process is not None and not system.exited(process.pid):
            system.kill_group(process.pid)
            system.end_cli(process, self.git.running, timeout=5)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.relay.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


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


def _stop(number: int, frame: Any) -> None:
    raise SystemExit(128 + number)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="overnight's coding-agent adapter")
    parser.add_argument("--config", required=True, help="the adapter's config (JSON)")
    args = parser.parse_args(argv)
    try:
        config = Config.load(args.config)
    except ConfigError as error:
        print(f"coding-agent: {error}", file=sys.stderr, flush=True)
        return CONFIG_EXIT_CODE
    signal.signal(signal.SIGTERM, _stop)
    adapter = Adapter(config)
    try:
        return adapter.run()
    finally:
        adapter.close()


if __name__ == "__main__":
    sys.exit(main())
