"""The coding-agent adapter's steps (`coding_agent.py`): what each completed tool call leaves,
and what the last one leaves.

- **A step** (`step`): the workspace's changes committed (`step N: <call>`), the session file
  read and stored, the spend reported, a checkpoint, HEAD pushed (in the pusher's thread); the
  same call with the same input counted, and the CLI stopped when it came `loop_repeats` times
  in a row, or when `max_turns` steps were done in one process.
- **The ways out** (`done`, `fresh`, `looped`): the last commit and push, the spend, the
  checkpoint that says why, and the kit told (`finish`, `fresh_context`); the exit code is the
  run loop's (`coding_agent.Adapter.run`).

Standard library only, Python 3.8 or newer, like the kit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import overnight_agent as kit
    from overnight.agent_kit.coding_agent_record import Outcome
    from overnight.agent_kit.coding_agent_session import Sessions
else:  # in the sandbox: sibling modules
    import clis
    import overnight_agent as kit
    from coding_agent_session import Sessions


class Steps(Sessions):
    """Each completed tool call made a step; the run's end made its last."""

    # --- a step ---

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

    # --- the ways out ---

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

    def done(self, outcome: Outcome) -> None:
        summary = outcome.text.strip() or self.last_text.strip() or "done"
        head = self.final_commit(f"step {self.checkpoint.step}: done")
        self.flush_push()
        self.note(f"done: {summary}")
        self.save("done")
        self.report_spend()
        outputs = {"branch": self.config.branch, "commit": head}
        kit.finish(summary, outputs)
        self.log("finished", outputs=outputs)

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

    def looped(self) -> None:
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
