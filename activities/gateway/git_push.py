"""What a push asks for, read from the head of a smart-HTTP `git-receive-pack` request, and the
answer git shows its user when the gateway refuses it.

The request body starts with pkt-lines, one command each (`<old> <new> <ref>`, the first
followed by NUL and the client's capabilities), ended by a flush packet (`0000`); the pack
follows. Only the commands are read here; the pack is carried to git untouched.

A sandbox may push its run's branch and the run's private refs (`refs/overnight/<run>/...`,
its kept workspaces) and nothing else: not `main`, not a tag, not another run's refs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_COMMANDS = 1000
# A pkt-line's length prefix: four hex digits, counting themselves.
_HEX = re.compile(rb"^[0-9a-f]{4}$")


class BadPush(Exception):
    """The request's head is not a receive-pack command list."""


@dataclass(frozen=True)
class Command:
    old: str
    new: str
    ref: str


@dataclass(frozen=True)
class PushHead:
    commands: tuple[Command, ...]
    capabilities: frozenset[str]
    # How many bytes of the body the commands took (through the flush packet).
    length: int


def read_head(data: bytes) -> PushHead | None:
    """The commands at the start of `data`, or None when more bytes are needed. BadPush when
    they are not pkt-lines of commands."""
    at = 0
    commands: list[Command] = []
    capabilities: frozenset[str] = frozenset()
    while True:
        if len(data) < at + 4:
            return None
        size_text = data[at : at + 4]
        if not _HEX.match(size_text):
            raise BadPush("not a pkt-line")
        size = int(size_text, 16)
        if size == 0:
            if not commands:
                raise BadPush("a push of no command")
            return PushHead(tuple(commands), capabilities, at + 4)
        if size < 4:
            raise BadPush("a pkt-line of a reserved length")
        if len(data) < at + size:
            return None
        line = data[at + 4 : at + size].rstrip(b"\n")
        at += size
        if line.startswith(b"shallow ") or line.startswith(b"push-cert"):
            raise BadPush("shallow and signed pushes are not taken")
        text, _, caps = line.partition(b"\0")
        if not commands and caps:
            capabilities = frozenset(caps.decode("ascii", "replace").split())
        parts = text.decode("utf-8", "replace").split(" ")
        if len(parts) != 3:
            raise BadPush("a command is not `<old> <new> <ref>`")
        commands.append(Command(*parts))
        if len(commands) > MAX_COMMANDS:
            raise BadPush("too many commands")


def allowed_refs(branch: str, run_id: str) -> tuple[str, str]:
    """The run's branch and the prefix of its private refs."""
    return f"refs/heads/{branch}", f"refs/overnight/{run_id}/"


def refused(head: PushHead, branch: str, run_id: str) -> dict[str, str]:
    """The refs of `head` the sandbox may not push, each with why (empty: the push may go on)."""
    own_branch, own_prefix = allowed_refs(branch, run_id)
    found = {}
    for command in head.commands:
        ref = command.ref
        if ref == own_branch or (ref.startswith(own_prefix) and ".." not in ref):
            continue
        found[ref] = f"overnight: this run may push only {own_branch} and {own_prefix}*"
    return found


def refusal_answer(head: PushHead, why: dict[str, str]) -> bytes:
    """A receive-pack result that refuses the whole push, ref by ref (`ng <ref> <why>`), as
    git prints it (` ! [remote rejected] main (overnight: ...)`); in side band 1 when the
    client asked for one."""
    report = [_pkt(b"unpack ok\n")]
    for command in head.commands:
        reason = why.get(command.ref, "overnight: another ref of this push was refused")
        report.append(_pkt(f"ng {command.ref} {reason}\n".encode()))
    report.append(b"0000")
    body = b"".join(report)
    if not {"side-band-64k", "side-band"} & head.capabilities:
        return body
    banded = []
    step = 65515 if "side-band-64k" in head.capabilities else 995
    for at in range(0, len(body), step):
        banded.append(_pkt(b"\x01" + body[at : at + step]))
    message = "overnight: refused: " + ", ".join(sorted(why)) + "\n"
    banded.append(_pkt(b"\x02" + message.encode()))
    return b"".join(banded) + b"0000"


def _pkt(payload: bytes) -> bytes:
    return f"{len(payload) + 4:04x}".encode() + payload
