"""The coding-agent CLIs overnight runs (`RunSpec.agent.kind`), one row each in
`AGENT_CLIS`: everything the worker knows of a kind (its pinned npm package, where its
native binary is in the package, what its npm launcher would set, its vendor's key and
hosts). What it does in the sandbox is the kit's (overnight/agent_kit/clis/); where it is
installed and seen is `overnight.core.coding_agents`. Pure data: the spec's rules read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The kinds of `AGENT_CLIS`, for the spec's model (a test holds the two the same).
AgentKind = Literal["claude-code", "codex", "gemini"]

# `platform.machine()` -> npm's cpu name.
NPM_CPU = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
RUST_TARGET = {"x64": "x86_64-unknown-linux-musl", "arm64": "aarch64-unknown-linux-musl"}


@dataclass(frozen=True)
class AgentCli:
    """One pinned CLI: its npm package and version, what `--version` prints, where its native
    binary is and what it needs from the worker."""

    kind: AgentKind
    package: str
    version: str
    version_line: str  # `<executable> --version` prints this (stripped)
    # The native binary in the install folder ({cpu}: npm's; {target}: Rust's, for it).
    binary: str
    # What its npm launcher would set ({folder}: the install folder as the process sees it).
    launcher_env: tuple[tuple[str, str], ...]
    # The variable its vendor's key is read from (the spec's default `model_credential`).
    key_env: str
    # Its model API's hosts, called when its spec names no `base_url`.
    api_hosts: tuple[str, ...]
    # Other hosts its sandbox reaches then (its sign-in).
    other_hosts: tuple[str, ...] = ()
    # Credentials it sends as bearer tokens (a subscription's sign-in), kept at the gateway
    # as the key is.
    bearer_envs: tuple[str, ...] = ()

    @property
    def npm_spec(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def folder_name(self) -> str:
        return f"{self.kind}-{self.version}"

    def executable(self, cpu: str) -> str:
        """The native binary, relative to the install folder, for npm's `cpu` (x64, arm64)."""
        if cpu not in RUST_TARGET:
            raise UnsupportedPlatform(f"{self.kind} has no Linux build for cpu {cpu!r} here")
        return self.binary.format(cpu=cpu, target=RUST_TARGET[cpu])

    def run_environment(self, install_folder: str) -> dict[str, str]:
        """Variables the native binary expects from its npm launcher (`install_folder` as
        the process sees it: the host path, or the sandbox's mount)."""
        return {name: value.format(folder=install_folder) for name, value in self.launcher_env}

    @property
    def egress_hosts(self) -> tuple[str, ...]:
        """What its sandbox reaches when its spec names no `base_url`."""
        return self.api_hosts + self.other_hosts


class UnsupportedPlatform(Exception):
    """This machine's CPU has no build of the CLI."""


CLAUDE_CODE = AgentCli(
    kind="claude-code",
    package="@anthropic-ai/claude-code",
    version="2.1.332",
    version_line="2.1.332 (Claude Code)",
    binary="node_modules/@anthropic-ai/claude-code-linux-{cpu}/claude",
    launcher_env=(("DISABLE_AUTOUPDATER", "1"),),
    key_env="ANTHROPIC_API_KEY",
    api_hosts=("api.anthropic.com",),
    bearer_envs=("CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"),
)
CODEX = AgentCli(
    kind="codex",
    package="@openai/codex",
    version="0.171.0",
    version_line="codex-cli 0.171.0",
    binary="node_modules/@openai/codex-linux-{cpu}/vendor/{target}/bin/codex",
    launcher_env=(
        ("CODEX_MANAGED_BY_NPM", "1"),
        ("CODEX_MANAGED_PACKAGE_ROOT", "{folder}/node_modules/@openai/codex"),
    ),
    key_env="OPENAI_API_KEY",
    api_hosts=("api.openai.com",),
    other_hosts=("chatgpt.com",),
)
GEMINI = AgentCli(
    kind="gemini",
    package="@google/gemini-cli",
    version="0.61.0",
    version_line="0.61.0",
    # Plain JavaScript for the sandbox's node (its first line: #!/usr/bin/env node).
    binary="node_modules/@google/gemini-cli/bundle/gemini.js",
    launcher_env=(),
    key_env="GEMINI_API_KEY",
    api_hosts=("generativelanguage.googleapis.com",),
)
AGENT_CLIS: dict[str, AgentCli] = {cli.kind: cli for cli in (CLAUDE_CODE, CODEX, GEMINI)}
# Every kind's model API hosts: what an agent of one's own may call.
ANY_API_HOST: tuple[str, ...] = tuple(
    dict.fromkeys(host for cli in AGENT_CLIS.values() for host in cli.api_hosts)
)


def agent_cli(kind: str) -> AgentCli:
    try:
        return AGENT_CLIS[kind]
    except KeyError:
        known = ", ".join(AGENT_CLIS)
        raise ValueError(f"unknown agent kind {kind!r} (known: {known})") from None


def npm_cpu(machine: str) -> str:
    """npm's cpu name for `platform.machine()`; the machine name itself when unknown."""
    return NPM_CPU.get(machine.lower(), machine)
