"""What the coding-agent adapter ends after its CLI (coding_agent_leftovers.end_cli), run in a
process that is not the root the adapter assumes: a program with children of its own, as a
pytest worker is (a dev server, a child whose owner waits for it later, as asyncio's watcher
thread does on a loaded machine).

The CLI's daemon (a session of its own, re-parented to the subreaper) is still ended and
reaped, as in the adapter's own process, and so is what began after that CLI (a leftover
that escaped, ended at the next CLI's end); the program's earlier children are left alone,
running or ended, with their exit status theirs to read. Before, every descendant of the
process was a leftover: the server was SIGKILLed and the ended child's status taken (its
owner read 0, asyncio's watcher would say 255).

Each case runs in a child process (`HARNESS`): it makes itself a subreaper, which no test
process should become.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

KIT = Path(__file__).resolve().parents[2] / "overnight" / "agent_kit"

HARNESS = r"""
import json, os, subprocess, sys, time
import coding_agent_leftovers as leftovers

assert leftovers.become_subreaper()
# The program's own children, begun before the CLI: a server, and a child that has ended but
# that its owner has not waited for yet.
server = subprocess.Popen(["sleep", "600"])
early = subprocess.Popen(["sh", "-c", "exit 7"])
os.waitid(os.P_PID, early.pid, os.WEXITED | os.WNOWAIT)
time.sleep(0.05)  # the CLI begins clock ticks (10 ms) after them
# The CLI: a daemon in a session of its own (re-parented here once the CLI ends), then exit 0.
daemonize = "setsid sh -c 'echo $$ > daemon.pid; exec sleep 600' & "
daemonize += "while [ ! -s daemon.pid ]; do sleep 0.01; done; exit 0"
cli = subprocess.Popen(["sh", "-c", daemonize], start_new_session=True)
ended = leftovers.end_cli(cli, set)
returncode = cli.wait()
daemon = int(open("daemon.pid").read())
# Begun after the first CLI: one of its leftovers that escaped (forked while they were ended),
# ended at the next CLI's end.
escaped = subprocess.Popen(["sleep", "600"])
again = subprocess.Popen(["true"], start_new_session=True)
ended_again = leftovers.end_cli(again, set)
again.wait()
print(json.dumps({
    "ended_again": ended_again,
    "escaped_gone": leftovers.started(escaped.pid) is None,
    "cli": returncode,
    "ended": ended,
    "daemon_gone": leftovers.started(daemon) is None,
    "server": server.poll(),
    "early": early.wait(),
}))
server.kill()
server.wait()
"""


def test_the_clis_daemon_is_ended_and_the_programs_own_children_are_left_alone(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", HARNESS],
        cwd=tmp_path,
        env={"PYTHONPATH": str(KIT), "PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["cli"] == 0
    assert seen["daemon_gone"], seen  # ended and reaped, as in the adapter's own process
    assert [name.split(" ")[0] for name in seen["ended"]] == ["sleep"], seen
    assert seen["server"] is None, seen  # still running
    assert seen["early"] == 7, seen  # its status, read by its owner
    assert seen["escaped_gone"] and len(seen["ended_again"]) == 1, seen
