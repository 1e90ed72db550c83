"""overnight's coding-agent adapter: a coding-agent CLI (Claude Code, Codex) as a run's agent,
supervised.

    python3 /workspace/.overnight/kit/coding_agent.py \
        --config /workspace/.overnight/coding-agent.json

It runs in the sandbox as the run's agent and starts the CLI (its native binary, `cli` in the
config) as its child, headless, reading the CLI's JSON lines as they come. Standard library
only, Python 3.8 or newer, like the kit it speaks to the supervisor through
(`overnight_agent`: `Checkpoint`, `ask`, `wait_until`, `report_usage`, `finish`,
`fresh_context`).

This file is the entry point and the run loop (what each way a CLI process ended leads to,
and the exit codes). The `Adapter` is built of parts, one concern a module, each a layer on
the one before: `coding_agent_record` (its parts, notes, checkpoint, log, spend),
`coding_agent_session` (which session a process starts in; the session file read, stored,
restored), `coding_agent_step` (each completed tool call: commit, checkpoint, loop, push; the
ways out), `coding_agent_process` (one CLI process: started, pumped, drained, its outcome),
and beside them `coding_agent_waits` (usage limits, backoffs). Its config is
`coding_agent_config`'s. Below them: `clis` (one package per CLI kind: what is particular to
each, its spend included, and the table of them), `coding_agent_system` (output lines, files,
the session store), `coding_agent_leftovers` (the processes a dead CLI leaves),
`coding_agent_git` (commits and pushes), `coding_agent_mcp` (the MCP server the CLI is given,
and its relay to this process).

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
import os
import shutil
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overnight.agent_kit import clis
    from overnight.agent_kit import coding_agent_leftovers as leftovers
    from overnight.agent_kit.coding_agent_config import Config, ConfigError
    from overnight.agent_kit.coding_agent_process import CliProcess
    from overnight.agent_kit.coding_agent_session import RESUME_PROMPT
    from overnight.agent_kit.coding_agent_waits import Waits
else:  # in the sandbox: the kit's folder, where this file is
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import clis
    import coding_agent_leftovers as leftovers
    from coding_agent_config import Config, ConfigError
    from coding_agent_process import CliProcess
    from coding_agent_session import RESUME_PROMPT
    from coding_agent_waits import Waits

LOOP_EXIT_CODE = 76  # overnight.core.agent_spec.LOOP_EXIT_CODE
CONFIG_EXIT_CODE = 2
FAILED_EXIT_CODE = 1
MAX_FAILURES = 5  # CLI failures in a row with no tool call completed: the adapter gives up


class Adapter(CliProcess, Waits):
    """The coding-agent adapter: its parts (see the module's docstring), run to an exit code."""

    # --- the run ---

    def run(self) -> int:
        if not leftovers.become_subreaper():
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
                self.done(outcome)
                return 0
            if kind in (clis.MAX_TURNS, clis.CONTEXT_FULL):
                self.fresh(outcome)  # exits 75
            if kind == "loop":
                self.looped()
                return LOOP_EXIT_CODE
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

    # --- the end ---

    def close(self) -> None:
        process = self.process
        if process is not None and not leftovers.exited(process.pid):
            leftovers.kill_group(process.pid)
            leftovers.end_cli(process, self.git.running, timeout=5)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.relay.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


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
