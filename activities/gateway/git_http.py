"""The run's origin over smart HTTP, served by the gateway at `/git/<name>`: the sandbox clones,
fetches and pushes there, and never needs the origin's folder, its permissions or its
credential.

A local-folder origin is served by `git http-backend`, run as the folder's owner (a root
worker writes nothing the user cannot write again), with no system or global config. An
origin at an http(s) URL is forwarded to, with the worker's credential for it added here
(`RunSpec.repo_credential`, a variable of the worker's environment the sandbox never sees).
Every push's commands are read before the origin sees the push (git_push.py): one ref the run
may not push refuses the whole push, with a line git prints; the pack is never read.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from activities.gateway import git_forward
from activities.gateway.git_push import BadPush, read_head, refusal_answer, refused
from activities.gateway.http_wire import iter_body
from activities.gateway.origin import Origin
from overnight.core.asyncio_children import end_child, kill_child

ROUTE = "/git/"
SERVICES = ("git-upload-pack", "git-receive-pack")
MAX_HEAD = 256 * 1024
# What git sends first, alone, before a push bigger than its `http.postBuffer` (1 MiB): a
# flush packet, to see that the push would be taken before it streams the pack.
PROBE = b"0000"
CHUNK = 256 * 1024
BACKEND_SECONDS = 3600.0
CONNECT_SECONDS = 10.0
# A backend that has written its answer ends within this, or is killed.
EXIT_SECONDS = 30.0


class Answer(Exception):
    def __init__(self, status: int, reason: str, text: str) -> None:
        super().__init__(text)
        self.status, self.reason, self.text = status, reason, text


def token_in_path(target: str) -> tuple[str, str, str] | None:
    """`/git/<sandbox>/<token>/<rest>` as the sandbox, its token, and the target without them
    (`/git/<rest>`); None for another."""
    if not target.startswith(ROUTE):
        return None
    sandbox, _, rest = target[len(ROUTE) :].partition("/")
    token, _, rest = rest.partition("/")
    if not sandbox or not token or not rest:
        return None
    return sandbox, token, ROUTE + rest


def repository_path(origin: Origin, target: str) -> tuple[str, str]:
    """What a request's target asks of `origin`: the path below the repository (`info/refs`,
    `git-upload-pack`, ...) and the query. Answer(404) for any other."""
    url = urlsplit(target)
    prefix = f"{ROUTE}{origin.name}/"
    if not url.path.startswith(prefix):
        raise Answer(404, "Not Found", f"overnight gateway: this sandbox's origin is {prefix}")
    rest = url.path[len(prefix) :]
    if rest not in ("info/refs", *SERVICES):
        raise Answer(404, "Not Found", "overnight gateway: only git's smart HTTP is served")
    return rest, url.query


async def serve(
    origin: Origin,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    sandbox: str,
) -> None:
    rest, query = repository_path(origin, target)
    named = {k.lower(): v for k, v in headers}
    body = iter_body(reader, named)
    first = b""
    if rest == "git-receive-pack":
        if named.get("content-encoding", "identity").lower() not in ("", "identity"):
            raise Answer(415, "Unsupported Media Type", "overnight gateway: an encoded push")
        head = await _push_head(body, origin)
        if isinstance(head, _Refused):
            writer.write(head.answer)
            await writer.drain()
            return
        first = head
    if origin.url:
        try:
            await git_forward.forward(origin, method, rest, query, named, first, body, writer)
        except git_forward.ForwardFailed:
            # The origin did not answer: so the sandbox's git is not answered either, and says
            # what it would say going there itself (the run's status names the origin).
            writer.transport.abort()
        return
    await _backend(origin, method, rest, query, named, first, body, writer, sandbox)


@dataclass(frozen=True)
class _Refused:
    answer: bytes


async def _push_head(body: AsyncIterator[bytes], origin: Origin) -> bytes | _Refused:
    """The push's head read from `body` (returned, to be given to git first), or its
    refusal when it asks for a ref the run may not push."""
    data = b""
    async for chunk in body:
        data += chunk
        if data == PROBE:
            continue  # git's probe, if the body ends here (or commands to come)
        try:
            head = read_head(data)
        except BadPush as error:
            raise Answer(400, "Bad Request", f"overnight gateway: {error}") from None
        if head is not None:
            why = refused(head, origin.branch, origin.run_id)
            if not why:
                return data
            answer = refusal_answer(head, why)
            response = (
                "HTTP/1.1 200 OK\r\n"
                "Content-Type: application/x-git-receive-pack-result\r\n"
                f"Content-Length: {len(answer)}\r\nConnection: close\r\n\r\n"
            ).encode()
            return _Refused(response + answer)
        if len(data) > MAX_HEAD:
            break
    if data == PROBE:
        return data  # pushes nothing: receive-pack answers it as git expects
    raise Answer(400, "Bad Request", "overnight gateway: a push without its commands")


async def _backend(
    origin: Origin,
    method: str,
    rest: str,
    query: str,
    headers: dict[str, str],
    first: bytes,
    body: AsyncIterator[bytes],
    writer: asyncio.StreamWriter,
    sandbox: str,
) -> None:
    folder = Path(origin.path)
    try:
        owner = folder.stat()
    except OSError:
        raise Answer(502, "Bad Gateway", "overnight gateway: the origin is gone") from None
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": "/nonexistent",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        # The folder is the user's own; a worker of another user trusts it for this serve.
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
        "GIT_PROJECT_ROOT": str(folder.parent),
        "GIT_HTTP_EXPORT_ALL": "1",
        "REMOTE_USER": sandbox,  # receive-pack is served to a known user only
        "REMOTE_ADDR": "127.0.0.1",
        "REQUEST_METHOD": method,
        "PATH_INFO": f"/{folder.name}/{rest}",
        "QUERY_STRING": query,
        "CONTENT_TYPE": headers.get("content-type", ""),
        "HTTP_CONTENT_ENCODING": headers.get("content-encoding", ""),
        "HTTP_GIT_PROTOCOL": headers.get("git-protocol", ""),
    }
    as_owner = {}
    if os.geteuid() == 0 and owner.st_uid != 0:
        as_owner = {"user": owner.st_uid, "group": owner.st_gid, "extra_groups": []}
    git = shutil.which("git") or "git"
    process = await asyncio.create_subprocess_exec(
        git,
        "http-backend",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd="/",
        **as_owner,  # type: ignore[arg-type]
    )
    assert process.stdin is not None and process.stdout is not None
    feeding = asyncio.create_task(_feed(process.stdin, first, body))
    answered = False
    try:
        head = await asyncio.wait_for(process.stdout.readuntil(b"\r\n\r\n"), BACKEND_SECONDS)
        writer.write(_response_head(head))
        while chunk := await process.stdout.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        await feeding
        answered = True
    finally:
        if not feeding.done():
            feeding.cancel()
        if not answered:
            kill_child(process)  # cut short (the sandbox's git went away): it is not needed
        await _ended(process)


async def _ended(process: asyncio.subprocess.Process) -> None:
    """Wait for the backend's end: one that answered ends on its own as its output ends
    (killed only if it has not within EXIT_SECONDS). Never `process.kill()`: see
    overnight/core/asyncio_children.py."""
    try:
        await asyncio.wait_for(process.wait(), EXIT_SECONDS)
    except TimeoutError:
        await end_child(process)


async def _feed(stdin: asyncio.StreamWriter, first: bytes, body: AsyncIterator[bytes]) -> None:
    try:
        if first:
            stdin.write(first)
        async for chunk in body:
            stdin.write(chunk)
            await stdin.drain()
    finally:
        stdin.close()


def _response_head(cgi: bytes) -> bytes:
    """A CGI head (`Status: 404 Not Found`, headers) as an HTTP/1.1 one that closes."""
    status = "200 OK"
    lines = []
    for line in cgi.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = value.strip()
        elif name and name.lower() not in ("connection", "content-length"):
            lines.append(f"{name}:{value}")
    text = "\r\n".join([f"HTTP/1.1 {status}", *lines, "Connection: close"]) + "\r\n\r\n"
    return text.encode("latin-1")
