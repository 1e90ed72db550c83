"""The coding-agent CLI's session, for the adapter (`coding_agent.py`): which session a CLI
process starts in, and its session file kept.

- **The plan** (`plan`): the checkpoint's open session resumed when its transcript is here, or
  restored from the session store (a new sandbox); else a new session, seeded from the
  checkpoint when it holds work (the task, the notes, `git log --oneline`); a failed done
  check told as the next prompt.
- **The file** (`_read_session`, `_store_session`, `_look_at_session`): its new lines read for
  the kind (spend, limits), its size and digest in the checkpoint, its copy in the store,
  after every step and while a long tool call runs.

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import coding_agent_system as system
    from overnight.agent_kit import overnight_agent as kit
    from overnight.agent_kit.coding_agent_record import AdapterRecord
else:  # in the sandbox: sibling modules
    import clis
    import coding_agent_system as system
    import overnight_agent as kit
    from coding_agent_record import AdapterRecord

RESUME_PROMPT = "continue"
# A CLI "finishes" by ending its turn, not by exiting: the done check's failure is told so
# (the kit's file says "exit 0", which is for agents written on the kit).
DONE_CHECK_LEAD = (
    "(From overnight, which supervises this run.) When you ended your last turn, overnight ran "
    "the done check below, and it failed: the task is not finished yet. Fix what it reports, "
    "then end your turn again; overnight runs every check again."
)
# How often the session file is looked at while a tool call runs (the CLI writes it late).
SESSION_LOOK_SECONDS = 1.0


class Sessions(AdapterRecord):
    """The CLI's session: planned at each start, its file read, stored and restored."""

    # --- the plan ---

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

    # --- the session file ---

    def _open_session_lines(self, session: str, mode: str) -> None:
        self.session_lines = None
        path = self.cli.session_file(session) if session else ""
        offset = os.path.getsize(path) if path and os.path.exists(path) else 0
        if path:
            self.session_lines = system.JsonLines(path, offset, self.cli.session_needles)
        self.cli.process_starting(session, mode, path)

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
