"""What Claude Code and Codex do with the gateway's spend-cap refusal:
`python -m bench.model_cap_clis [--seconds N]`.

A real gateway (this process) serves a run whose cap is already reached; each installed CLI
(`OVERNIGHT_TEST_AGENTS_HOME`, else ~/.cache/overnight-test-agents) is pointed at it as its
base URL with the run's model token as its API key, and asked one thing. Printed per CLI: how
many requests reached the gateway (each refused at once, nothing forwarded), over how long,
its exit code, and its last words. No figure is written to bench/results: it says what the
refusal does to the clients, for docs/gateway.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from activities.gateway.service import Gateway, model_stats_of, model_token

CLIS = {
    "claude-code": "claude-code-2.1.332/node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    "codex": "codex-0.171.0/node_modules/@openai/codex/bin/codex.js",
}


def _agents_home() -> Path:
    given = os.environ.get("OVERNIGHT_TEST_AGENTS_HOME")
    return Path(given) if given else Path.home() / ".cache" / "overnight-test-agents"


def _command(kind: str, cli: Path, url: str, home: Path) -> tuple[list[str], dict[str, str]]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "IS_SANDBOX": "1"}
    if kind == "claude-code":
        env |= {
            "ANTHROPIC_BASE_URL": url,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        flags = ["--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
        return [str(cli), "-p", *flags, "--model", "claude-sonnet-4-5", "say hi"], env
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        "\n".join(
            [
                'model_provider = "overnight"',
                "[analytics]",
                "enabled = false",
                "[features]",
                "plugins = false",
                "[model_providers.overnight]",
                'name = "overnight"',
                f'base_url = "{url}/v1"',
                'wire_api = "responses"',
                'env_key = "OPENAI_API_KEY"',
                "",
            ]
        )
    )
    env["CODEX_HOME"] = str(codex_home)
    flags = ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    return ["node", str(cli), "exec", *flags, "-m", "gpt-5.5-codex", "say hi"], env


def probe(kind: str, seconds: float) -> dict[str, object]:
    cli = _agents_home() / "agents" / CLIS[kind]
    with tempfile.TemporaryDirectory(prefix="cap-clis-") as scratch:
        home = Path(scratch) / "home"
        sandbox, run_id = f"cap-{kind}-1", f"cap-{kind}"
        folder = home / "sandboxes" / sandbox
        folder.mkdir(parents=True)
        model = {"upstream": "http://127.0.0.1:9", "credential_env": "", "run_id": run_id}
        model["cap_usd"] = 0.0  # type: ignore[assignment]
        (folder / "sandbox.json").write_text(json.dumps({"state": "running", "model": model}))
        gateway = Gateway(home)
        port = gateway.start()
        user = Path(scratch) / "user"
        user.mkdir()
        command, env = _command(kind, cli, f"http://127.0.0.1:{port}/model", user)
        key = "ANTHROPIC_API_KEY" if kind == "claude-code" else "OPENAI_API_KEY"
        env[key] = model_token(home, sandbox)
        began = time.monotonic()
        try:
            done = subprocess.run(
                command, env=env, cwd=user, capture_output=True, text=True, timeout=seconds
            )
            exit_code: int | str = done.returncode
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            exit_code = f"still running after {seconds:g} s"
            raw = (expired.stdout or b"") + (expired.stderr or b"")
            output = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        took = time.monotonic() - began
        gateway.stop()
        refused = model_stats_of(home, run_id).get("cap_refusals", 0)
    return {
        "cli": kind,
        "requests_refused": refused,
        "seconds": round(took, 1),
        "exit": exit_code,
        "last_words": output.strip().splitlines()[-3:],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.model_cap_clis")
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--cli", choices=sorted(CLIS), action="append")
    args = parser.parse_args(argv)
    for kind in args.cli or sorted(CLIS):
        print(json.dumps(probe(kind, args.seconds)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
