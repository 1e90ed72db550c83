"""What the origin itself says a ref holds: `git ls-remote`, run by the worker, never by the
sandbox.

A keep's script runs in the agent's sandbox, where everything is the agent's: its git config
can send a push elsewhere (`url.*.pushInsteadOf`, `remote.<url>.pushurl`), its PATH can hold
a `git` that prints what it likes. So the worker believes a keep only once the origin, asked
from the worker, holds the exact commit the keep reported at its ref.

The worker's view of the origin: the spec's `repo` as `clone_source` gives it (for a local
folder the host path, bound at the same path into the sandbox; for a URL the URL, with the
credentials the spec's URL carries, if any). The git that asks reads no configuration but
the one-line file written here (no system or global config, a fresh empty HOME, no
`GIT_*` variable of the worker's), allows only the transport the origin's spelling names
(`protocol.allow=never`, then that one), and runs no hook and no fsmonitor. A local origin is
a repository the agent may write to (it is bound writable): `git ls-remote` of it runs
`git upload-pack` there, which lists refs and runs nothing its config names
(`uploadpack.packObjectsHook` is read only from protected config; hooks are off).
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from overnight.core.asyncio_children import end_child
from overnight.core.specs import scrub_url

# One look at the origin is killed past this; a keep looks at most LOOKS times.
LS_REMOTE_SECONDS = 60
LOOKS = 3
LOOK_PAUSE_SECONDS = 0.5
COMMIT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")
_SCHEMES = {
    "file": "file",
    "http": "http",
    "https": "https",
    "ssh": "ssh",
    "git+ssh": "ssh",
    "ssh+git": "ssh",
    "git": "git",
}
# The worker's variables a git here may see: where programs are, the locale, and how the
# worker reaches the network (proxies, CA bundles). No GIT_* one, no HOME.
_KEPT_VARIABLES = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


class OriginUnreadable(Exception):
    """`git ls-remote` of the origin failed (its words, credentials scrubbed)."""


@dataclass(frozen=True)
class OriginCheck:
    """Whether the origin's `ref` holds `commit`; `found` is what it holds (None: no such ref,
    or the origin could not be read: `detail` says which)."""

    confirmed: bool
    found: str | None
    detail: str = ""


def transport(repo: str) -> str | None:
    """The one transport git may use for `repo` (None: a spelling git would hand to a remote
    helper or an external command, which the worker never runs)."""
    if "::" in repo.split("/", 1)[0]:
        return None  # `<helper>::<address>`
    scheme, sep, _ = repo.partition("://")
    if sep:
        return _SCHEMES.get(scheme.lower())
    if _SCP_LIKE.match(repo):
        return "ssh"
    return "file" if repo.startswith("/") else None


def local_folder(repo: str) -> str | None:
    """The folder of a local origin (a path, or a `file://` URL), else None."""
    if transport(repo) != "file":
        return None
    return repo[len("file://") :] if repo.lower().startswith("file://") else repo


def _quoted(value: str) -> str:
    """`value` as a git config file's quoted string."""
    for plain, escaped in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\t", "\\t")):
        value = value.replace(plain, escaped)
    return f'"{value}"'


def git_command(repo: str, ref: str) -> list[str]:
    """The hardened `git ls-remote` of `ref` in `repo` (an exact ref; `--` before both)."""
    allowed = transport(repo)
    if allowed is None:
        raise OriginUnreadable("the origin's address names no transport the worker uses")
    return [
        "git",
        "-c",
        "protocol.allow=never",
        "-c",
        f"protocol.{allowed}.allow=always",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "credential.helper=",
        "ls-remote",
        "--",
        repo,
        ref,
    ]


def git_environment(home: str, config: str) -> dict[str, str]:
    """The environment of the git that asks: the worker's network settings, nothing of git's
    own from the worker, a fresh HOME, and `config` as the only configuration read."""
    env = {name: os.environ[name] for name in _KEPT_VARIABLES if name in os.environ}
    env.setdefault("PATH", os.defpath)
    return env | {
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": config,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "GIT_PROTOCOL_FROM_USER": "0",
        "GIT_OPTIONAL_LOCKS": "0",
    }


def listed_commit(stdout: str, ref: str) -> str | None:
    """The commit `ref` names in `git ls-remote`'s output (its pattern also matches refs that
    merely end in `/<ref>`: only the exact name counts)."""
    for line in stdout.splitlines():
        oid, tab, name = line.partition("\t")
        if tab and name == ref:
            return oid.strip()
    return None


async def ref_on_origin(repo: str, ref: str, credential: str = "") -> str | None:
    """The commit the origin's `ref` holds (None: no such ref). `OriginUnreadable` when the
    origin cannot be asked. `credential`: the worker's token for an http(s) origin, sent as
    git's basic authentication from the config file (never on a command line)."""
    command = git_command(repo, ref)
    with tempfile.TemporaryDirectory(prefix="overnight-origin-") as home:
        config = Path(home) / "gitconfig"
        # A local origin owned by another user (an operator's folder, a root worker) is still
        # listed: upload-pack there only lists refs (see above). It judges a repository with
        # a work tree (a user's `git init`) by its `.git` folder, a bare one by itself.
        folder = local_folder(repo)
        text = ""
        if folder is not None:
            trusted = [folder, str(Path(folder) / ".git")]
            text = "[safe]\n" + "".join(f"\tdirectory = {_quoted(p)}\n" for p in trusted)
        if credential:
            pair = base64.b64encode(f"x-access-token:{credential}".encode()).decode()
            text += f"[http]\n\textraHeader = {_quoted('Authorization: Basic ' + pair)}\n"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=home,
            env=git_environment(home, str(config)),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), LS_REMOTE_SECONDS)
        except TimeoutError:
            await end_child(process)  # never process.kill(): see overnight/core/asyncio_children.py
            raise OriginUnreadable(f"git ls-remote took over {LS_REMOTE_SECONDS} s") from None
    if process.returncode != 0:
        words = err.decode(errors="replace").strip()[-300:] or f"exit {process.returncode}"
        raise OriginUnreadable(scrub_url(words, repo))
    return listed_commit(out.decode(errors="replace"), ref)


async def confirm(repo: str, ref: str, commit: str, credential: str = "") -> OriginCheck:
    """Whether the origin's `ref` holds exactly `commit`, asked up to LOOKS times (a hosted
    origin may answer a moment behind its push)."""
    if not COMMIT_ID.match(commit):
        return OriginCheck(False, None, "the sandbox named no commit id")
    check = OriginCheck(False, None)
    for look in range(LOOKS):
        if look:
            await asyncio.sleep(LOOK_PAUSE_SECONDS * look)
        try:
            found = await ref_on_origin(repo, ref, credential)
        except OriginUnreadable as why:
            check = OriginCheck(False, None, f"the worker could not list the origin: {why}")
            continue
        if found == commit:
            return OriginCheck(True, found)
        held = "has no such ref" if found is None else f"holds {found[:12]} there"
        check = OriginCheck(False, found, f"the origin {held}")
    return check


def credential_value(name: str) -> str:
    """The value of the worker's variable `name` (a spec's `repo_credential`); empty: none."""
    return os.environ.get(name, "") if name else ""
