"""Running overnight's coding-agent adapter (overnight/agent_kit/coding_agent.py) with a real
CLI, in a `Sandbox`, against the fake model API, as a run's agent would be run.

`Workspace` lays out what a local sandbox of a run holds, in the sandbox's work folder (seen
as `/workspace` inside):

| inside | what |
|---|---|
| `/workspace/app` | the clone (`cwd`), on the run's branch `agent/adapter-test` |
| `/workspace/origin.git` | its origin, a bare repository |
| `/workspace/.overnight/kit` | the kit and the adapter, copied from overnight/agent_kit |
| `/workspace/.overnight/coding-agent.json` | the adapter's config |
| `/workspace/checkpoint.json` | the checkpoint; the kit's requests file beside it |
| `/workspace/.overnight/answers` | where overnight answers the kit's requests |

`Adapter` is one run of it (its process is bubblewrap's, so its pid is not the adapter's).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes.model_api import FakeModelApi
from tests.agent_clis.clis import (
    FAKE_KEY,
    executable_name,
    kill_seen,
    live_tree,
    parent,
    remember,
)
from tests.agent_clis.sandbox import Sandbox
from tests.kinds import KIND_FACTS, facts
from tests.waits import CAP

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "overnight" / "agent_kit"
BRANCH = "agent/adapter-test"
RUN_ID = "adapter-test"
STORE_INSIDE = "/overnight-session-store"
# The default models of the kinds that report no dollars of their own (no price of their own
# here): $1 in and $10 out a million tokens.
PRICES = {
    kind.priced_model: {"input_per_mtok": 1.0, "output_per_mtok": 10.0}
    for kind in KIND_FACTS.values()
    if kind.priced_model
}


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **{k: "t" for k in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")}}
        | {"GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_COMMITTER_EMAIL": "t@t.invalid"},
    )
    return done.stdout.strip()


def _chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid)
    for folder, names, files in os.walk(root):
        for name in names + files:
            os.lchown(os.path.join(folder, name), uid, uid)


@dataclass
class Workspace:
    sandbox: Sandbox
    store: Path | None = None  # the session store on the host (bound in at STORE_INSIDE)

    # --- paths: on the host, and inside ---

    @property
    def work(self) -> Path:
        return self.sandbox.work

    def inside(self, relative: str) -> str:
        return f"{self.sandbox.work_inside}/{relative}" if relative else self.sandbox.work_inside

    @property
    def app(self) -> Path:
        return self.work / "app"

    @property
    def origin(self) -> Path:
        return self.work / "origin.git"

    @property
    def checkpoint_file(self) -> Path:
        return self.work / "checkpoint.json"

    @property
    def answers(self) -> Path:
        return self.work / ".overnight" / "answers"

    @property
    def state(self) -> Path:
        return self.work / ".overnight" / "coding-agent"

    # --- making it ---

    def make(self, origin_from: Path | None = None) -> Workspace:
        """A clone on the run's branch (of `origin_from`'s branch when given: a fresh sandbox
        of the same run), the kit and the adapter."""
        if origin_from is None:
            git("init", "-q", "--bare", "-b", "main", str(self.origin))
            seed = self.work / "seed"
            git("init", "-q", "-b", "main", str(seed))
            (seed / "README.md").write_text("# app\n")
            git("add", "-A", cwd=seed)
            git("commit", "-q", "-m", "initial", cwd=seed)
            git("push", "-q", str(self.origin), "main", cwd=seed)
            shutil.rmtree(seed)
            git("clone", "-q", str(self.origin), str(self.app))
            git("checkout", "-q", "-b", BRANCH, cwd=self.app)
        else:
            shutil.copytree(origin_from, self.origin)
            git("clone", "-q", "-b", BRANCH, str(self.origin), str(self.app))
        # The sandbox sees origin at its path inside.
        git("remote", "set-url", "origin", self.inside("origin.git"), cwd=self.app)
        # The kit as sandboxes get it: the whole folder, its packages too.
        kit = self.work / ".overnight" / "kit"
        kit.parent.mkdir(parents=True)
        shutil.copytree(KIT, kit, ignore=shutil.ignore_patterns("__pycache__"))
        self.answers.mkdir(parents=True)
        if self.sandbox.uid is not None:
            _chown_tree(self.work, self.sandbox.uid)
            if self.store is not None:
                _chown_tree(self.store, self.sandbox.uid)
        return self

    def write_config(self, fake: FakeModelApi, **values: Any) -> None:
        config = {
            "kind": self.sandbox.cli.kind,
            "prompt": "Do the task.",
            "model": "",
            "max_turns": 0,
            "base_url": fake.url,
            "cli": self.sandbox.executable_inside,
            "run_id": RUN_ID,
            "branch": BRANCH,
            "cwd": self.inside("app"),
            "checkpoint_path": self.inside("checkpoint.json"),
            "prices": PRICES,
            "api_backoff_seconds": [0.2],
            "usage_backoff_seconds": 1,
        }
        if self.store is not None:
            config["session_store"] = STORE_INSIDE if self.sandbox.isolated else str(self.store)
        config.update(values)
        path = self.work / ".overnight" / "coding-agent.json"
        path.write_text(json.dumps(config, indent=1))
        if self.sandbox.uid is not None:
            os.chown(path, self.sandbox.uid, self.sandbox.uid)

    # --- reading it ---

    def checkpoint(self) -> dict[str, Any]:
        try:
            value = json.loads(self.checkpoint_file.read_text())
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def requests(self) -> dict[str, Any]:
        """What the kit asks of the supervisor now (its requests file; the first protocol's
        key in the checkpoint when there is no file)."""
        from overnight.agent_kit import overnight_agent

        path = self.checkpoint_file.parent / overnight_agent.REQUESTS_FILE
        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError):
            value = self.checkpoint().get(overnight_agent.REQUESTS_KEY) or {}
        return value if isinstance(value, dict) else {}

    def answer(self, request_id: str, text: str) -> None:
        """Answer a request as the supervisor does: a file named by its id, written whole."""
        temp = self.answers / f".{request_id}.tmp"
        temp.write_text(json.dumps({"id": request_id, "answer": text}))
        if self.sandbox.uid is not None:
            os.chown(temp, self.sandbox.uid, self.sandbox.uid)
        temp.rename(self.answers / f"{request_id}.json")

    def log(self) -> list[dict[str, Any]]:
        try:
            lines = (self.state / "log.jsonl").read_text().splitlines()
        except OSError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def steps(self) -> list[dict[str, Any]]:
        return [line for line in self.log() if line["event"] == "step"]

    def origin_log(self) -> list[str]:
        """The run's branch on origin, newest first (empty before its first push)."""
        try:
            return git("--git-dir", str(self.origin), "log", "--format=%s", BRANCH).splitlines()
        except subprocess.CalledProcessError:
            return []

    def origin_head(self) -> str:
        return git("--git-dir", str(self.origin), "rev-parse", BRANCH)

    def origin_file(self, path: str) -> str:
        return git("--git-dir", str(self.origin), "show", f"{BRANCH}:{path}")


def environment(fake: FakeModelApi, kind: str, ws: Workspace, **extra: str) -> dict[str, str]:
    """The run's environment for the adapter: overnight's variables and a credential."""
    env = {
        "OVERNIGHT_RUN_ID": RUN_ID,
        "OVERNIGHT_ATTEMPT": "1",
        "OVERNIGHT_RESTART_REASON": "",
        "OVERNIGHT_CHECKPOINT": ws.inside("checkpoint.json"),
        "OVERNIGHT_ANSWERS_DIR": ws.inside(".overnight/answers"),
        "PYTHONPATH": ws.inside(".overnight/kit"),
    }
    env[facts(kind).credential_env] = FAKE_KEY
    env.update(facts(kind).adapter_env)
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


@dataclass
class Adapter:
    ws: Workspace
    process: subprocess.Popen[str]
    started_at: float
    seen: dict[int, str] = field(default_factory=dict)  # pid -> start time (clis.kill_seen)

    @classmethod
    def start(cls, ws: Workspace, env: dict[str, str]) -> Adapter:
        argv = [
            "python3",
            ws.inside(".overnight/kit/coding_agent.py"),
            "--config",
            ws.inside(".overnight/coding-agent.json"),
        ]
        command, full_env = ws.sandbox.command(argv, env)
        if ws.store is not None and ws.sandbox.isolated:
            at = command.index("--chdir")
            command[at:at] = ["--bind", str(ws.store), STORE_INSIDE]
        started_at = time.monotonic()
        process = subprocess.Popen(
            command,
            cwd=ws.work,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        return cls(ws, process, started_at)

    def tree(self) -> list[int]:
        pids = live_tree(self.process)
        remember(self.seen, pids)
        return pids

    def named(self, name: str) -> list[int]:
        return [pid for pid in self.tree() if executable_name(pid) == name]

    def cli_pid(self, timeout: float = CAP) -> int:
        name = facts(self.ws.sandbox.cli.kind).binary
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid in self.tree():
                if executable_name(pid) == name and executable_name(parent(pid)) != name:
                    return pid
            time.sleep(0.01)
        raise AssertionError(f"no {name} process under {self.process.pid}")

    def wait(self, timeout: float = 120) -> tuple[int, str, str]:
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.process.communicate()
            raise AssertionError(
                f"the adapter did not end in {timeout} s: {out[-1500:]} {err[-1500:]}"
            ) from None
        return self.process.returncode, out, err

    def kill(self) -> None:
        """The whole sandbox at once (its PID namespace ends with bubblewrap)."""
        self.tree()
        kill_seen(self.seen)

    def clean_up(self) -> None:
        """Kill what is left of it and close its pipes."""
        self.kill()
        try:
            self.process.communicate(timeout=CAP)
        except (subprocess.TimeoutExpired, ValueError):
            pass


def wait_until(probe: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"not in {timeout} s: {what}")
