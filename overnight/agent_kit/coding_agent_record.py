"""The coding-agent adapter's parts and its record: the base every part of the `Adapter`
(`coding_agent.py`) stands on.

Its parts (the kind's `clis.Cli`, git and the pusher, the spend, the session store, the MCP
relay) are made once here, and every other part uses them through `self`. Its record is what
the supervisor and a person see of the run: the checkpoint it saves (with `progress_mark`,
what changes only with new work), the notes (the last ones kept, each clipped, printed too),
the adapter's own log (`coding-agent/log.jsonl` beside the config) and the spend reported to
the kit. The state of one CLI process (its pending tool calls, why it is being stopped) is
declared here too, as every part reads it; `coding_agent_process` begins it anew per process,
and tells how it ended as an `Outcome`.

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import coding_agent_git as git
    from overnight.agent_kit import coding_agent_mcp as mcp
    from overnight.agent_kit import coding_agent_system as system
    from overnight.agent_kit import overnight_agent as kit
    from overnight.agent_kit.coding_agent_config import Config
else:  # in the sandbox: sibling modules
    import clis
    import coding_agent_git as git
    import coding_agent_mcp as mcp
    import coding_agent_system as system
    import overnight_agent as kit

MAX_NOTES = 40
# Its word on its work, in the checkpoint (overnight.core.checkpoint_text.PROGRESS_KEY).
PROGRESS_MARK = "progress_mark"
NOTE_CHARS = 300


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


class AdapterRecord:
    """The adapter's parts, and what it records: notes, the checkpoint, its log, the spend."""

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
        self.git = git.Git(config.cwd)
        self.pusher = git.Pusher(self.git, config.branch, self._push_failed)
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

    def _reset_process_state(self) -> None:
        """One CLI process's state, begun anew for each (`CliProcess.run_cli`)."""
        self.pending: dict[str, clis.ToolStarted] = {}
        self.running_label = ""
        self.finished: clis.Finished | None = None
        self.limit: clis.LimitHit | None = None
        self.stop_reason = ""
        self.steps_in_process = 0
        self.last_text = ""
        self.last_retry_save = 0.0
        self.next_session_look = 0.0

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

    # --- spend ---

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
