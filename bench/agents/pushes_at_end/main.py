"""An agent that commits and pushes only at its end (bench/workspace_kept.py).

Steps 1..AGENT_STEPS: each writes step-<k>.txt in the clone, never committed, then the
checkpoint, then holds AGENT_HOLD seconds. The first attempt exits 3 after step AGENT_CRASH_AT.
Each attempt's start records the step files it finds; the last step commits every file and
pushes the branch. What a crash cost shows in the checkpoint (`found`) and on the branch.
"""

import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

cp = pathlib.Path(os.environ["OVERNIGHT_CHECKPOINT"])
attempt = os.environ["OVERNIGHT_ATTEMPT"]
state: dict[str, Any] = json.loads(cp.read_text()) if cp.exists() else {"step": 0, "found": {}}
app = pathlib.Path.cwd()
state["found"][attempt] = sorted(p.name for p in app.glob("step-*.txt"))
steps = int(os.environ.get("AGENT_STEPS", "4"))
hold = float(os.environ.get("AGENT_HOLD", "1.5"))
crash_at = int(os.environ.get("AGENT_CRASH_AT", "0"))
while state["step"] < steps:
    k = state["step"] + 1
    (app / f"step-{k}.txt").write_text(f"step {k}, attempt {attempt}\n")
    state.update(step=k, next=f"step {k + 1}")
    tmp = cp.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(cp)
    time.sleep(hold)
    if attempt == "1" and k == crash_at:
        sys.exit(3)
ident = ["-c", "user.name=agent", "-c", "user.email=agent@example.invalid"]
subprocess.run(["git", "add", "-A"], check=True)
subprocess.run(["git", *ident, "commit", "-q", "-m", "the agent's work"], check=True)
subprocess.run(["git", "push", "-q", "origin", "HEAD"], check=True)
