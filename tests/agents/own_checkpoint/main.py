"""An agent on the agent kit that saves its checkpoint its own way, for the end-to-end tests of
the kit's requests file: `json.dump` to a temporary file and a rename, right after each of the
kit's calls, and (while a call blocks) from a thread every 20 ms, never with a key of the kit's
in it. The kit's requests must reach overnight all the same.

`AGENT_MODE=spend`: eight steps of a second each, each noted with the pid that did it; after
step 2 it reports `AGENT_SPEND_USD` of model spend (past a small budget); then `finish()`.
`AGENT_MODE=wait`: `wait_until` `AGENT_WAIT_SECONDS` from now (overnight pauses the sandbox
meanwhile), then `finish()`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from overnight_agent import finish, report_usage, wait_until

PATH = os.environ["OVERNIGHT_CHECKPOINT"]
LOCK = threading.Lock()


def load() -> dict[str, Any]:
    try:
        with open(PATH) as source:
            found = json.load(source)
    except (OSError, ValueError):
        return {"step": 0}
    return found if isinstance(found, dict) else {"step": 0}


def save(state: dict[str, Any]) -> None:
    with LOCK:
        with open(PATH + ".tmp", "w") as out:
            json.dump(state, out)
        os.replace(PATH + ".tmp", PATH)


def keep_saving(state: dict[str, Any]) -> None:
    while True:
        save(state)
        time.sleep(0.02)


def spend(state: dict[str, Any]) -> None:
    while state["step"] < 8:
        time.sleep(1)
        state["step"] += 1
        state.setdefault("done_by", []).append([state["step"], os.getpid()])
        save(state)
        if state["step"] == 2:
            report_usage(float(os.environ.get("AGENT_SPEND_USD", "2")), model="test-model")
            save(state)


def wait(state: dict[str, Any]) -> None:
    state["pid_before"] = os.getpid()
    save(state)
    threading.Thread(target=keep_saving, args=(state,), daemon=True).start()
    began = time.time()
    state["on_time"] = wait_until(began + float(os.environ.get("AGENT_WAIT_SECONDS", "35")), "w")
    state["waited"] = round(time.time() - began, 1)
    state["pid_after"] = os.getpid()
    save(state)


def main() -> int:
    state = load()
    if os.environ.get("AGENT_MODE") == "wait":
        wait(state)
    else:
        spend(state)
    finish("done its own way", {"steps": str(state["step"]), "pid": str(os.getpid())})
    save(state)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
