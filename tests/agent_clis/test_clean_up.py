"""The real-CLI tests' clean-up (tests/agent_clis/clis.py `kill_seen`, used by `Running` and
`Adapter`) kills only processes it saw, never a later process given one of their pids.

It used to SIGKILL every pid its sandbox's tree ever had, and the tree under the sandbox's
own pid after it was reaped: in a full suite (five test processes, 32768 pids on this
machine) a pid ended seconds before may already be another test's git, bubblewrap or dev
server. The reuse is made certain here in a PID namespace of its own, where the next pid can
be set (`/proc/sys/kernel/ns_last_pid`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

HARNESS = r"""
import json, subprocess, time
from tests.agent_clis.clis import kill_seen, live_tree, remember

seen = {}
first = subprocess.Popen(["sleep", "600"], text=True)
remember(seen, live_tree(first))  # the test's process, seen in its tree
first.kill()
first.wait()
assert live_tree(first) == []  # reaped: its pid names nothing of the test's any more
time.sleep(0.05)  # a later clock tick: the start time tells the two apart
with open("/proc/sys/kernel/ns_last_pid", "w") as last:
    last.write(str(first.pid - 1))
later = subprocess.Popen(["sleep", "600"])  # another test's process, given the same pid
kill_seen(seen)
print(json.dumps({"same_pid": later.pid == first.pid, "later": later.poll()}))
later.kill()
later.wait()
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a PID namespace of its own (root, unshare) to reuse a pid at will",
)
def test_a_pid_seen_in_a_tree_and_given_to_another_process_is_not_killed() -> None:
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", HARNESS],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["same_pid"], seen
    assert seen["later"] is None, seen  # still running
