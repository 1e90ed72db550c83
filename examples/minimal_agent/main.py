import json
import os
import urllib.request

from overnight_agent import Checkpoint, attempt, fresh_context, restart_reason

STEPS = ["read the code", "write the fix", "open the pull request"]


def open_pull_request(key: str) -> None:  # stands for GitHub's API; the key makes it idempotent
    body = json.dumps({"key": key, "action": "open_pull_request", "detail": ""}).encode()
    urllib.request.urlopen(os.environ["OVERNIGHT_LEDGER_URL"] + "/actions", body)


cp = Checkpoint.load()  # OVERNIGHT_CHECKPOINT's; empty on the first start
if restart_reason():
    cp.note(f"attempt {attempt()} resumed at step {cp.step + 1}: {restart_reason()}")
while cp.step < len(STEPS):
    name, key = STEPS[cp.step], cp.action_key()  # key: {run_id}-step-{n} on every attempt
    if name == "open the pull request" and not cp.done(key):
        open_pull_request(key)
        cp.mark_done(key)
    cp.plan, cp.step = STEPS, cp.step + 1
    cp.next = STEPS[cp.step] if cp.step < len(STEPS) else "done"
    cp.note(f"step {cp.step}: {name}")
    cp.save()  # atomic: temp file, fsync, rename; overnight copies it when it changes
    if cp.step == 1 and not cp.data.get("fresh"):  # as if the context window were full
        cp.data["fresh"] = True
        fresh_context("summary: tasks.py is what matters", cp)  # saves, exits: start afresh
