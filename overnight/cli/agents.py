"""Coding agents from the command line: `overnight start --agent claude-code|codex --repo URL
--prompt TEXT` (a `RunSpec` with `agent`, built from flags instead of a spec file), and
`overnight agents` (which kinds this machine's worker can run, and what fixes the others).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from overnight.cli.commands import Command
from overnight.cli.help_texts import JSON_HELP
from overnight.core.agent_kinds import AGENT_CLIS
from overnight.core.errors import SpecError
from overnight.core.models import RunSpec
from overnight.core.specs import parse_spec

# The flags that only make sense with --agent (the spec file says all of it otherwise).
AGENT_FLAGS = (
    "repo",
    "prompt",
    "prompt_file",
    "model",
    "max_turns",
    "base_url",
    "run_id",
    "branch",
    "secret_env",
    "bind",
    "writable_bind",
    "host_port",
    "max_spend",
    "print_spec",
)


def add_start_arguments(start: argparse.ArgumentParser) -> None:
    """`start`'s flags for a coding agent (`--agent KIND` and what goes with it)."""
    group = start.add_argument_group("a coding agent instead of a spec file")
    group.add_argument("--agent", choices=sorted(AGENT_CLIS), help="the coding agent's CLI")
    group.add_argument("--repo", help="the repository it works on (URL, or a local path)")
    group.add_argument("--prompt", help="what it is to do")
    group.add_argument("--prompt-file", metavar="PATH", help="the prompt from a file (- : stdin)")
    group.add_argument("--model", default="", help="the model (default: the CLI's own)")
    group.add_argument(
        "--max-turns", type=int, default=0, metavar="N", help="turns per fresh context (0: none)"
    )
    group.add_argument("--base-url", default="", help="a gateway (or a fake) for its model API")
    group.add_argument("--run-id", default="", help="the run's id (default: a new one)")
    group.add_argument("--branch", default="", help="the branch it works on (agent/RUN_ID)")
    group.add_argument(
        "--secret-env",
        action="append",
        metavar="NAME",
        help="a credential the worker copies into the sandbox (repeatable; default: "
        + ", ".join(f"{cli.key_env} for {kind}" for kind, cli in AGENT_CLIS.items())
        + ")",
    )
    group.add_argument("--bind", action="append", metavar="PATH", help="a host path, read-only")
    group.add_argument(
        "--writable-bind", action="append", metavar="PATH", help="a host path, writable"
    )
    group.add_argument(
        "--host-port",
        action="append",
        type=int,
        metavar="PORT",
        help="a port on the worker's loopback it may reach (a loopback --base-url's is added)",
    )
    group.add_argument("--max-spend", type=float, metavar="USD", help="the spend budget")
    group.add_argument(
        "--print-spec", action="store_true", help="print the spec it would start, and stop"
    )


def start_problem(args: argparse.Namespace) -> str | None:
    """Why `start`'s arguments do not make one run (None: they do)."""
    ways = [args.spec is not None, args.many is not None, args.agent is not None]
    if sum(ways) != 1:
        return "start takes a spec file, --many TASKS.jsonl or --agent KIND (one of them)"
    if args.agent is None:
        given = [flag for flag in AGENT_FLAGS if getattr(args, flag, None) not in (None, "", 0)]
        if given:
            return f"--{given[0].replace('_', '-')} goes with --agent (a spec file says all)"
        return None
    if not args.repo:
        return "--agent needs --repo URL"
    if (args.prompt is None) == (args.prompt_file is None):
        return "--agent needs --prompt TEXT or --prompt-file PATH (one of them)"
    return None


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """The run's spec from `start --agent ...` (SpecError, one line, when it is not one)."""
    raw = spec_fields(args)
    return parse_spec(raw, source="start --agent")


def spec_fields(args: argparse.Namespace) -> dict[str, Any]:
    prompt = args.prompt if args.prompt is not None else _read_prompt(args.prompt_file)
    agent: dict[str, Any] = {"kind": args.agent, "prompt": prompt}
    if args.model:
        agent["model"] = args.model
    if args.max_turns:
        agent["max_turns"] = args.max_turns
    if args.base_url:
        agent["base_url"] = args.base_url
    raw: dict[str, Any] = {"repo": _repo(args.repo), "agent": agent}
    if args.run_id:
        raw["run_id"] = args.run_id
    if args.branch:
        raw["branch"] = args.branch
    # The credential a kind's CLI is given unless `--secret-env` names others (the worker
    # copies it from its own environment: OVERNIGHT_SECRET_ENV must allow it).
    default = AGENT_CLIS[args.agent].key_env
    raw["secret_env"] = list(dict.fromkeys(args.secret_env or [default]))
    binds: list[dict[str, Any]] = [{"path": _absolute(p)} for p in args.bind or []]
    binds += [{"path": _absolute(p), "writable": True} for p in args.writable_bind or []]
    if binds:
        raw["binds"] = binds
    ports = list(args.host_port or [])
    loopback = loopback_port(args.base_url)
    if loopback is not None:
        ports.append(loopback)
    if ports:
        raw["host_ports"] = sorted(set(ports))
    if args.max_spend is not None:
        raw["budget"] = {"max_spend_usd": args.max_spend}
    return raw


def loopback_port(url: str) -> int | None:
    """The port of a base URL on this machine's loopback (a local sandbox reaches the host's
    loopback only on the ports its spec names), else None."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if host is None:
        return None
    try:
        is_loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return None
    if not is_loopback:
        return None
    return port or (443 if parts.scheme == "https" else 80)


def _read_prompt(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"--prompt-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(
            f"--prompt-file {path}: {getattr(error, 'strerror', None) or error}"
        ) from None


def _repo(repo: str) -> str:
    """A local path as an absolute one (the worker clones it from elsewhere); URLs as given."""
    if "://" in repo or ":" in repo.split("/")[0]:
        return repo
    return _absolute(repo)


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


# --- overnight agents ---


def _arguments(agents: argparse.ArgumentParser) -> None:
    agents.add_argument("--json", action="store_true", help=JSON_HELP)


async def run(args: argparse.Namespace) -> int:
    """One line a kind (ready, or why not and the one command that fixes it); exit 0 when
    every kind is ready, 1 otherwise. Read from `$OVERNIGHT_HOME` on this machine: run it where
    the worker runs, with its settings."""
    import asyncio

    states = await asyncio.to_thread(readiness)
    if args.json:
        print(json.dumps(states, indent=2))
    else:
        for state in states:
            print(state["line"])
    return 0 if all(state["ready"] for state in states) else 1


def readiness() -> list[dict[str, Any]]:
    from activities.providers.local.isolation import bwrap_problem
    from overnight.worker.agent_clis import check_all

    sandbox = bwrap_problem()
    states: list[dict[str, Any]] = []
    for state in check_all():
        line, ready, reason, fix = state.line(), state.ready, state.reason, state.fix
        if ready and sandbox is not None:
            # Installed, but coding agents run only in isolated sandboxes.
            ready, reason = False, f"{sandbox}: coding agents run only in isolated sandboxes"
            fix = "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap)"
            line = f"{state.kind} {state.version}: not available: {reason}; fix: {fix}"
        states.append(
            {
                "kind": state.kind,
                "version": state.version,
                "ready": ready,
                "reason": reason,
                "fix": fix,
                "executable": str(state.executable or ""),
                "line": line,
            }
        )
    return states


COMMANDS = (
    Command(
        "agents",
        "which coding agents this machine's worker can run, and what fixes the rest",
        _arguments,
        run,
    ),
)
