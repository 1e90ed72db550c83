"""The agent demo's model: the scripted fake model API (fakes/model_api) as its own process on
a free loopback port (`python -m fakes.model_api --script FILE --port 0 --log FILE`), its
script a small task of six answers (write greet.py, run it, fix it, a slow run the CLI is
killed in, the run again, the final word), and its log read back: which session each request
came from, and the tool results it carried. Either CLI's API is served (one script renders
for both: fakes/model_api/turns.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overnight.cli import client as api

# The folder holding overnight's packages (the checkout, or site-packages): `fakes` is beside
# `overnight` in both (pyproject.toml installs the fakes the demo plays on).
PACKAGES_HOME = Path(__file__).resolve().parents[2]
FAKE_PACKAGE = PACKAGES_HOME / "fakes" / "model_api"
SLOW_SECONDS = 30  # the slow tool call's length: the CLI is killed while it runs
# The slow tool call's process, a stand-in for a slow test suite. (Not `sleep 30 && ...`:
# Claude Code refuses a command that begins with a long sleep.)
SLOW_CHECK = f"python3 -c 'import time; time.sleep({SLOW_SECONDS})'"
SLOW_PROCESS = ["python3", "-c", f"import time; time.sleep({SLOW_SECONDS})"]
FAKE_READY_SECONDS = 30
APP = "/workspace/app"  # the spec's cwd (the clone)


def model_script() -> dict[str, Any]:
    """The fake model's answers, in order (fakes/model_api/script_file.py)."""
    slow = f"{SLOW_CHECK} && python3 greet.py > greeting.txt"
    return {
        "turns": [
            {
                "text": "I'll write the script first.",
                "tools": [
                    {"write": {"path": f"{APP}/greet.py", "content": "print('Helo, overnight')\n"}}
                ],
                "label": "write greet.py",
            },
            {"tools": [{"shell": "python3 greet.py"}], "label": "run it"},
            {
                "text": "It says Helo: a typo. Fixing it.",
                "tools": [{"shell": "sed -i 's/Helo/Hello/' greet.py"}],
                "label": "fix it",
            },
            {"tools": [{"shell": slow}], "label": "slow run (the CLI is killed here)"},
            {
                "text": "The last run was cut off; running it again.",
                "tools": [{"shell": "python3 greet.py > greeting.txt && cat greeting.txt"}],
                "label": "run it again",
            },
            {
                "text": "greet.py prints 'Hello, overnight'; its output is in greeting.txt.",
                "label": "final answer",
            },
        ]
    }


@dataclass
class FakeModelApiProcess:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        """What the fake has answered so far, one summary a request, in order."""
        if not self.log.exists():
            return []
        found = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line being written
            summary = {key: entry.get(key) for key in ("number", "session_id", "label")}
            summary["call_ids"] = entry.get("call_ids") or []
            summary["results"] = _tool_results(entry.get("body"))
            found.append(summary)
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def _tool_results(body: object) -> dict[str, str]:
    """A request's tool results (Messages' `tool_result` blocks, Responses'
    `function_call_output` items): call id -> the result's text."""
    results: dict[str, str] = {}
    items = body.get("input") if isinstance(body, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            results[str(item.get("call_id"))] = str(item.get("output"))
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                value = block.get("content")
                if isinstance(value, list):
                    value = " ".join(str(part.get("text", "")) for part in value if part)
                results[str(block.get("tool_use_id"))] = str(value)
    return results


def start_fake_model_api(folder: Path) -> FakeModelApiProcess:
    """`python -m fakes.model_api` on a free port of 127.0.0.1, serving `model_script()`."""
    if not (FAKE_PACKAGE / "__main__.py").is_file():
        raise api.OvernightError(
            f"the fake model API is missing ({FAKE_PACKAGE}): reinstall overnight"
        )
    folder.mkdir(parents=True, exist_ok=True)
    script, log = folder / "model-api-script.json", folder / "model-api.log"
    script.write_text(json.dumps(model_script(), indent=2) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "fakes.model_api", "--script", str(script)]
    command += ["--port", "0", "--log", str(log)]
    process = subprocess.Popen(
        command,
        cwd=PACKAGES_HOME,  # `-m fakes.model_api`: overnight's own, beside it
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    # Its first line: "fake model API on http://127.0.0.1:PORT: ..." (or why it could not).
    first = _first_line(process, FAKE_READY_SECONDS)
    if not first.startswith("fake model API on http://"):
        process.kill()
        process.wait()
        process.stdout.close()
        raise api.OvernightError(f"the fake model API did not start: {first or 'no output'}")
    url = first.removeprefix("fake model API on ").split(": ", 1)[0]
    return FakeModelApiProcess(process=process, url=url, log=log)


def _first_line(process: subprocess.Popen[str], seconds: float) -> str:
    stdout = process.stdout
    assert stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(seconds)
    return lines[0].strip() if lines else ""
