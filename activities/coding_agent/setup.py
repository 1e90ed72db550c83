"""A coding agent's sandbox (`RunSpec.agent`: Claude Code or Codex): what the worker adds to
the usual clone, branch, kit and checkpoint, and the command it starts.

The agent is overnight's adapter (`overnight/agent_kit/coding_agent.py`, standard library
only), which runs the CLI as its child; the worker gives it what follows.

On the local provider:

- **the CLI**, installed once per worker (`overnight.worker.agent_clis`, `bash
  scripts/install-agent-clis`) and shown read-only at `/overnight/agents/<kind>-<version>`,
  never copied (each is about 400 MB). A run whose kind is not installed here is refused at its
  start (`SpecRefused`, one line naming the command that fixes it), before anything is made.
- **the kit read-only**: the worker's `overnight/agent_kit` at `/overnight/kit`, a folder of
  the sandbox's root, which its user can neither write nor rename; the adapter runs from
  there. (The usual copy at `/workspace/.overnight/kit` is uploaded too: on `PYTHONPATH` as for
  every agent, but the model's tools could change it, and the supervisor's own agent must not
  be changed by the agent it supervises.)
- **its config**, `/workspace/.overnight/coding-agent.json` (`adapter_config`), written at each
  create and each start in the sandbox: the spec's `agent`, the CLI's path, the run's branch,
  cwd and checkpoint, the loop threshold, the model prices (`OVERNIGHT_MODEL_PRICES`) and
  backoffs, and the session store.
- **a session store** that outlives the sandbox: `$OVERNIGHT_HOME/sessions/<run_id>/`, bound
  writable at `/overnight/session` in each of the run's sandboxes. The adapter copies the CLI's
  session files there after every step and restores them from there at its start, so a fresh
  sandbox (the old one crashed, stopped, reached its lease end, or was deleted) resumes the
  same session. It is inside the sandbox's disk limit (an ext4 image of the run's carved out
  of `disk_mib`, or measured with the sandbox: activities/providers/local/run_store.py, which
  every writable worker mount goes through) and freed on each host when the run ends
  (`free_run_store`). Kept on the worker, not pushed to the origin as a private ref: a transcript
  holds every tool output the model saw (a printed secret, a file's contents), and the
  origin is the user's repository host, readable by everyone who may read the repository; a
  per-step push of a transcript growing to megabytes would also cost the network, while a
  local copy costs a write. What it does not survive is the worker's machine itself (the
  sandboxes die with it): a new sandbox elsewhere finds no session, and the adapter starts a
  new one seeded from the checkpoint, saying so. Workflow history holds only the session id
  and digest the adapter puts in its checkpoint, never the transcript.

On Runtime nothing of the worker is mounted (`mounts` gives none there):

- **the CLI** comes with the sandbox, created as a copy of a template disk snapshot that
  holds it under `/workspace/.overnight/agents/<kind>-<version>` (`coding_agent_template`):
  made once per CLI version, cpu and sandbox size by uploading the worker's install (402 MB
  for Claude Code, once), found again by its label, made again when it is gone. An attempt
  sends no byte of the CLI.
- **the adapter** runs from the kit uploaded with every sandbox (`KIT_MOUNT`).
- **the session store** is the same folder on the worker, carried by the worker
  (`coding_agent_sessions`): the adapter copies the session to `RUNTIME_SESSION_STORE` in the
  sandbox, the worker downloads it after each checkpoint that names a new digest and uploads
  it into each new sandbox at its create.

Unisolated local sandboxes are refused (the CLI would run with its permission checks off on
the worker's own host), and so are Runtime runs from a worker that is not x86_64 (Runtime's
sandboxes are, and the CLI they get is the worker's install), each with one line saying so.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from temporalio.exceptions import ApplicationError

from activities.errors import ErrorType, non_retryable
from activities.providers.protocol import WorkerMount
from activities.sandbox_base.setup import KIT_DIR
from overnight.core.addresses import plain_loopback_url
from overnight.core.agent_kinds import AgentCli, agent_cli, npm_cpu
from overnight.core.coding_agents import (
    install_folder,
    install_problem,
    sandbox_executable,
    sandbox_folder,
)
from overnight.core.constants import KIT_MOUNT
from overnight.core.grants import SPEC_REFUSED, refusal_message
from overnight.core.home import overnight_home
from overnight.core.model_prices import DEFAULT_PRICES as DEFAULT_PRICES
from overnight.core.model_prices import PRICE_FIELDS as PRICE_FIELDS
from overnight.core.model_prices import PRICES_ENV as PRICES_ENV
from overnight.core.model_prices import load_prices
from overnight.core.models import RunSpec
from overnight.core.provider_traits import traits

ADAPTER_CONFIG = "/workspace/.overnight/coding-agent.json"
# The worker's agent kit, read-only in a local isolated sandbox; the adapter runs from here.
KIT_READ_ONLY = "/overnight/kit"
ADAPTER_SCRIPT = "coding_agent.py"
# The run's session store in the sandbox, and on the worker (under $OVERNIGHT_HOME).
SESSION_MOUNT = "/overnight/session"
SESSIONS_FOLDER = "sessions"
# On Runtime: the adapter's session store inside the sandbox (only /workspace is the
# sandbox's own there), which the worker reads back after each checkpoint and fills again
# at each create (activities.coding_agent.sessions).
RUNTIME_SESSION_STORE = "/workspace/.overnight/session"
# The same tool call with the same input this many times in a row is a loop.
LOOP_REPEATS = 8
# A usage limit whose reset time the CLI does not say: wait this long, then try again.
USAGE_BACKOFF_SECONDS = 900
# 429 / 529 after the CLI's own retries: wait these in turn (the last again), then resume the
# same session.
API_BACKOFF_SECONDS = [30, 60, 120, 300, 600]
# The worker's settings replacing those two (a gateway that wants other pauses; tests).
USAGE_BACKOFF_ENV = "OVERNIGHT_USAGE_BACKOFF_SECONDS"
API_BACKOFF_ENV = "OVERNIGHT_MODEL_API_BACKOFF_SECONDS"
# Longer than a day is a typo, not a backoff.
MAX_BACKOFF_SECONDS = 24 * 3600
# The adapter's exit codes beyond the agent contract's: a loop (a restart naming it).
LOOP_EXIT_CODE = 76

# (seconds after a usage limit with no reset time, seconds after each 429/529 in turn)
Backoffs = tuple[float, list[float]]


def spec_cli(spec: RunSpec) -> AgentCli | None:
    """The spec's coding agent's CLI (None for a spec without `agent`). A create or a start
    looks it up once and hands it to the helpers below (their `cli`; not given, they look it
    up themselves)."""
    return None if spec.agent is None else agent_cli(spec.agent.kind)


def refusals(
    spec: RunSpec,
    home: Path | None = None,
    machine: str | None = None,
    *,
    cli: AgentCli | None = None,
) -> list[str]:
    """What this worker cannot give the spec's coding agent, one `field <name>: why (what to
    do)` each (none for a spec without `agent`)."""
    if spec.agent is None:
        return []
    found: list[str] = []
    machine = machine or platform.machine()
    kind = traits(spec.provider)
    if kind.worker_isolates and spec.isolation != "bubblewrap":
        found.append(
            "field isolation: coding agents (agent) run only in isolated sandboxes "
            '("bubblewrap"): the CLI runs with its permission checks off, which on the '
            "worker's own host would let the model do anything the worker may"
        )
    cli = _cli_of(spec, cli)
    if kind.machine and npm_cpu(machine) != npm_cpu(kind.machine):
        found.append(
            f"field provider: {kind.label} sandboxes are {kind.machine} and this worker's "
            f"{cli.kind} install is for {machine}: the CLI a {kind.label} sandbox gets is "
            f"uploaded from the worker's install; run runs with agent on {kind.label} from an "
            f"{kind.machine} worker"
        )
        return found
    problem = install_problem(cli, machine, home)
    if problem is not None:
        found.append(f"field agent: {problem}")
    return found


def refuse_unless_runnable(spec: RunSpec, cli: AgentCli | None = None) -> None:
    """Raise the run's non-retryable `SpecRefused` error when this worker cannot run the
    spec's coding agent (`refusals`)."""
    found = refusals(spec, cli=cli)
    if found:
        raise ApplicationError(refusal_message(found), type=SPEC_REFUSED, non_retryable=True)


def session_store(run_id: str, home: Path | None = None) -> Path:
    """The run's session store on this worker."""
    return (home if home is not None else overnight_home()) / SESSIONS_FOLDER / run_id


def mounts(
    spec: RunSpec, home: Path | None = None, *, cli: AgentCli | None = None
) -> tuple[WorkerMount, ...]:
    """What a coding agent's local sandbox shows of the worker: its CLI and the kit
    read-only, the run's session store writable (none for a spec without `agent`, and on
    Runtime, which has no mounts: see `coding_agent_template` and `coding_agent_sessions`)."""
    if spec.agent is None or not traits(spec.provider).mounts_worker_folders:
        return ()
    cli = _cli_of(spec, cli)
    return (
        WorkerMount(source=str(install_folder(cli, home)), target=sandbox_folder(cli)),
        WorkerMount(source=str(KIT_DIR), target=KIT_READ_ONLY),
        WorkerMount(
            source=str(session_store(spec.run_id, home)), target=SESSION_MOUNT, writable=True
        ),
    )


def adapter_command(spec: RunSpec | None = None) -> str:
    """The adapter from the read-only kit (local), or from the kit uploaded with every
    sandbox (Runtime, where nothing of the worker is mounted)."""
    mounted = spec is None or traits(spec.provider).mounts_worker_folders
    kit = KIT_READ_ONLY if mounted else KIT_MOUNT
    return f"python3 {kit}/{ADAPTER_SCRIPT} --config {ADAPTER_CONFIG}"


def adapter_env(spec: RunSpec, cli: AgentCli | None = None) -> dict[str, str]:
    """What the CLI's native binary expects from its npm launcher (the adapter passes its
    environment on to the CLI)."""
    if spec.agent is None:
        return {}
    cli = _cli_of(spec, cli)
    return cli.run_environment(sandbox_folder(cli, spec.provider))


def adapter_config(
    spec: RunSpec,
    prices: Mapping[str, Mapping[str, float]],
    machine: str | None = None,
    backoffs: Backoffs | None = None,
    *,
    cli: AgentCli | None = None,
) -> dict[str, Any]:
    """The adapter's config (the JSON at `ADAPTER_CONFIG`). Holds no secret: credentials
    reach the CLI through the environment (`secret_env`)."""
    usage_backoff, api_backoff = backoffs or (USAGE_BACKOFF_SECONDS, list(API_BACKOFF_SECONDS))
    agent = spec.agent
    assert agent is not None
    cli = _cli_of(spec, cli)
    kind = traits(spec.provider)
    if kind.cli_from_template:
        cli_path = sandbox_executable(cli, kind.machine, spec.provider)
        store = RUNTIME_SESSION_STORE
    else:
        cli_path = sandbox_executable(cli, machine or platform.machine())
        store = SESSION_MOUNT
    return {
        "kind": agent.kind,
        "prompt": agent.prompt,
        "model": agent.model,
        "max_turns": agent.max_turns,
        "base_url": plain_loopback_url(agent.base_url) if agent.base_url else "",
        "cli": cli_path,
        "run_id": spec.run_id,
        "branch": spec.branch,
        "cwd": spec.cwd,
        "checkpoint_path": spec.checkpoint_path,
        "loop_repeats": LOOP_REPEATS,
        "prices": {model: dict(figures) for model, figures in prices.items()},
        "usage_backoff_seconds": usage_backoff,
        "api_backoff_seconds": list(api_backoff),
        "session_store": store,
    }


def config_bytes(
    spec: RunSpec,
    environ: Mapping[str, str] | None = None,
    base_url: str = "",
    *,
    cli: AgentCli | None = None,
) -> bytes:
    """The adapter's config as written; `base_url`: the gateway the CLI's calls go through
    (activities/coding_agent/model_calls.py), over the spec's own."""
    prices, backoffs = model_prices(environ), worker_backoffs(environ)
    config = adapter_config(spec, prices, backoffs=backoffs, cli=cli)
    if base_url:
        config["base_url"] = base_url
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()


def _cli_of(spec: RunSpec, cli: AgentCli | None) -> AgentCli:
    """The CLI the caller looked up (`spec_cli`), else the spec's, looked up here."""
    if cli is not None:
        return cli
    assert spec.agent is not None
    return agent_cli(spec.agent.kind)


def worker_backoffs(environ: Mapping[str, str] | None = None) -> Backoffs:
    """The adapter's pauses: after a usage limit with no reset time (seconds), and after the
    model API's 429/529s (seconds in turn), from the worker's `OVERNIGHT_USAGE_BACKOFF_SECONDS`
    (`900`) and `OVERNIGHT_MODEL_API_BACKOFF_SECONDS` (`30,60,120,300,600`) when set. A value
    it cannot read refuses the run (non-retryable), naming the setting."""
    source = os.environ if environ is None else environ
    usage = _seconds_setting(source, USAGE_BACKOFF_ENV, [float(USAGE_BACKOFF_SECONDS)])
    steps = _seconds_setting(source, API_BACKOFF_ENV, [float(s) for s in API_BACKOFF_SECONDS])
    if len(usage) != 1:
        raise non_retryable(
            ErrorType.INVALID_REQUEST,
            f"{USAGE_BACKOFF_ENV}={source[USAGE_BACKOFF_ENV]}: one number of seconds "
            "(fix the worker's setting)",
        )
    return usage[0], steps


def _seconds_setting(source: Mapping[str, str], name: str, default: list[float]) -> list[float]:
    given = source.get(name, "").strip()
    if not given:
        return default
    try:
        values = [float(part) for part in given.split(",")]
    except ValueError:
        values = []
    if not values or not all(0 <= v <= MAX_BACKOFF_SECONDS for v in values):
        raise non_retryable(
            ErrorType.INVALID_REQUEST,
            f"{name}={given}: comma-separated seconds, 0 to {MAX_BACKOFF_SECONDS} "
            "(fix the worker's setting)",
        )
    return values


def model_prices(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, float]]:
    """The price table (overnight/core/model_prices.py): the defaults, with the worker's
    `OVERNIGHT_MODEL_PRICES` file over them. A file that cannot be read refuses the run
    (non-retryable), naming it."""
    try:
        return load_prices(os.environ if environ is None else environ)
    except ValueError as error:
        raise non_retryable(
            ErrorType.INVALID_REQUEST, f"{error} (fix the worker's setting)"
        ) from None
