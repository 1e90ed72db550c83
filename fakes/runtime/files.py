"""The file routes of the fake Runtime API: stat, read, write, folder archives, uploads.

All are guest calls (they wake a paused sandbox). A read sends `x-content-length`; a file up
to 1 MiB comes whole with its `x-content-sha256`, a larger one streams from disk in 1 MiB
pieces (a reader that stops early is sent little more). Stat answers `{exists, type, size, mode,
modifiedAt}` (ISO, microseconds) or `{"exists": false}`.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import re
import stat
import tarfile
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from activities.providers.local.files import OutsideWorkspace
from activities.providers.local.provider import LocalProvider
from activities.providers.protocol import SandboxProvider
from fakes.runtime.http import (
    Request,
    Response,
    Route,
    RouteTable,
    error_response,
    json_response,
)

CHUNK = 1024 * 1024
# A file up to this size is sent whole with its SHA-256 (`x-content-sha256`), as Runtime does.
SHA_MAX_BYTES = CHUNK


def stat_json(host: Path) -> dict[str, Any]:
    """`{exists, type, size, mode, modifiedAt}` of a path (links followed), or `{exists: false}`."""
    try:
        info = os.stat(host)
        kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
    except FileNotFoundError:
        try:
            info = os.lstat(host)  # a dangling link
        except FileNotFoundError:
            return {"exists": False}
        kind = "symlink"
    except NotADirectoryError:
        return {"exists": False}
    modified = datetime.fromtimestamp(info.st_mtime_ns / 1e9, UTC).isoformat(
        timespec="microseconds"
    )
    return {
        "exists": True,
        "type": kind,
        "size": info.st_size,
        "mode": format(info.st_mode & 0o777, "03o"),
        "modifiedAt": modified,
    }


def _mode(value: Any) -> int:
    """A file mode as the SDK sends it ("755"); 0644 when none is given."""
    if value in (None, ""):
        return 0o644
    mode = int(str(value), 8)
    if not 0 <= mode <= 0o777:
        raise ValueError(f"mode {value} is not a 3-digit octal mode")
    return mode


async def _file_pieces(host: Path, size: int, reading: set[BinaryIO]) -> AsyncIterator[bytes]:
    """The file's first `size` bytes in pieces, read as the client takes them, from the file as
    it was opened (a replace meanwhile is not mixed in). Kept in `reading` while open: a stream
    its connection never ended (its loop closed first) is closed by `FileRoutes.close`, not
    left to the garbage collector."""
    with open(host, "rb") as handle:
        reading.add(handle)
        try:
            left = size
            while left > 0:
                piece = await asyncio.to_thread(handle.read, min(CHUNK, left))
                if not piece:
                    return  # shrunk since: the client sees a short body against x-content-length
                left -= len(piece)
                yield piece
        finally:
            reading.discard(handle)


@dataclass
class _Upload:
    """An upload under way. Its parts are kept on the fake's disk at their offsets, not in
    memory, as a server would (a coding agent's CLI is about 400 MB in one upload)."""

    sandbox_id: str
    path: str
    archive: bool
    mode: int = 0o644
    sha256: str | None = None  # what the begin said the whole file's digest is
    spool: Any = field(default_factory=lambda: tempfile.TemporaryFile(prefix="fake-upload-"))
    size: int = 0

    def put(self, offset: int, data: bytes) -> None:
        # Positional: parts arrive in parallel, each written from its own thread.
        os.pwrite(self.spool.fileno(), data, offset)
        self.size = max(self.size, offset + len(data))

    def data(self) -> bytes:
        return os.pread(self.spool.fileno(), self.size, 0)

    def close(self) -> None:
        self.spool.close()


class FileRoutes:
    """Files of a sandbox, through the engine's capped read, write and folder upload."""

    def __init__(self, engine: SandboxProvider) -> None:
        self.engine = engine
        self._uploads: dict[str, _Upload] = {}
        self._reading: set[BinaryIO] = set()

    def close(self) -> None:
        """Close the files of streamed reads still open, and the spools of unfinished uploads."""
        for handle in list(self._reading):
            handle.close()
        self._reading.clear()
        for upload in self._uploads.values():
            upload.close()
        self._uploads.clear()

    def routes(self) -> RouteTable:
        sandbox = r"^/v1/sandboxes/([^/:]+)"
        upload = r"^/v1/sandboxes/[^/:]+/(?:files/archive/)?uploads/([^/:]+)"
        return [
            Route("GET", re.compile(sandbox + "/files/stat$"), "stat", self._stat, True),
            Route("GET", re.compile(sandbox + "/files/content$"), "read", self._read, True),
            Route("PUT", re.compile(sandbox + "/files/content$"), "write", self._write, True),
            Route("POST", re.compile(sandbox + "/files:chmod$"), "chmod", self._chmod, True),
            Route(
                "PUT", re.compile(sandbox + "/files/archive$"), "unarchive", self._unarchive, True
            ),
            Route(
                "POST",
                re.compile(sandbox + "/(files/archive/)?uploads$"),
                "upload",
                self._begin,
                True,
            ),
            Route("PUT", re.compile(upload + "$"), "upload_part", self._part, True),
            Route(
                "POST", re.compile(upload + ":(commit|abort)$"), "upload_end", self._finish, True
            ),
        ]

    async def _stat(self, request: Request, groups: list[str]) -> Response:
        path = request.arg("path") or ""
        if not isinstance(self.engine, LocalProvider):
            # A zero cap reads nothing: the engine answers from the file's size alone.
            found = await self.engine.read_file(groups[0], path, 0)
            if found.status == "outside":
                return error_response(403, "permission_denied", f"{path} is outside /workspace.")
            if found.status == "missing":
                return json_response({"exists": False})
            return json_response({"exists": True, "type": "file", "size": found.size})
        host = self._inside(groups[0], path)
        if host is None:
            return error_response(403, "permission_denied", f"{path} is outside /workspace.")
        return json_response(stat_json(host))

    def _inside(self, sandbox_id: str, path: str) -> Path | None:
        """The real path of a sandbox path, None if it (or a link on it) leads out of /workspace."""
        assert isinstance(self.engine, LocalProvider)
        self.engine.engine.get(sandbox_id)  # SandboxNotFound first
        workspace = self.engine.engine.workspace(sandbox_id)
        try:
            host = workspace.host_path(path)
        except OutsideWorkspace:
            return None
        return host if workspace.inside(host.resolve()) else None

    async def _read(self, request: Request, groups: list[str]) -> Response:
        path = request.arg("path") or ""
        host = self._inside(groups[0], path) if isinstance(self.engine, LocalProvider) else None
        if host is not None and host.is_dir():
            return error_response(409, "is_a_directory", f"{path} is a folder.")
        # Up to the small-file size read whole (with its SHA-256); larger, streamed from disk.
        found = await self.engine.read_file(groups[0], path, SHA_MAX_BYTES)
        if found.status == "outside":
            return error_response(403, "permission_denied", f"{path} is outside /workspace.")
        headers = {"content-type": "application/octet-stream"}
        if found.status == "ok" and found.data is not None:
            headers["x-content-length"] = str(len(found.data))
            headers["x-content-sha256"] = hashlib.sha256(found.data).hexdigest()
            return Response(200, found.data, headers)
        if found.status != "too_large" or host is None:
            return error_response(404, "file_not_found", f"{path} does not exist.")
        headers["x-content-length"] = str(found.size)
        pieces = _file_pieces(host.resolve(), found.size, self._reading)
        return Response(200, headers=headers, stream=pieces)

    async def _write(self, request: Request, groups: list[str]) -> Response:
        path = request.arg("path") or ""
        await self._put(groups[0], path, request.body, _mode(request.arg("mode")))
        return json_response({"path": path, "size": len(request.body)})

    async def _put(self, sandbox_id: str, path: str, data: bytes, mode: int) -> None:
        """Write a file atomically with its permissions (0644 unless asked otherwise)."""
        if isinstance(self.engine, LocalProvider):
            write = self.engine.engine.write_file
            await asyncio.to_thread(write, sandbox_id, path, data, mode=mode)
        else:
            await self.engine.write_file(sandbox_id, path, data)

    async def _chmod(self, request: Request, groups: list[str]) -> Response:
        body = request.json() or {}
        path, mode = str(body["path"]), _mode(body.get("mode"))
        if isinstance(self.engine, LocalProvider):
            host = self._inside(groups[0], path)
            if host is None:
                return error_response(403, "permission_denied", f"{path} is outside /workspace.")
            if not host.exists():
                return error_response(404, "file_not_found", f"{path} does not exist.")
            os.chmod(host, mode)
        return json_response({"path": path, "mode": format(mode, "03o")})

    async def _unarchive(self, request: Request, groups: list[str]) -> Response:
        await self._unpack(groups[0], request.arg("path") or "", request.body)
        return json_response({})

    async def _unpack(self, sandbox_id: str, remote_dir: str, data: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="fake-runtime-") as folder:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
                archive.extractall(folder, filter="data")
            await self.engine.upload_dir(sandbox_id, folder, remote_dir)

    async def _begin(self, request: Request, groups: list[str]) -> Response:
        body = request.json() or {}
        upload_id = f"up_{uuid.uuid4().hex[:12]}"
        upload = _Upload(groups[0], body["path"], archive=bool(groups[1]))
        upload.mode = _mode(body.get("mode"))
        upload.sha256 = body.get("sha256")
        self._uploads[upload_id] = upload
        # Echoing the mode tells the SDK it is applied at commit (no chmod needed).
        return json_response({"uploadId": upload_id, "chunkBytes": CHUNK, "mode": body.get("mode")})

    async def _part(self, request: Request, groups: list[str]) -> Response:
        upload = self._uploads[groups[0]]
        await asyncio.to_thread(upload.put, int(request.arg("offset") or 0), request.body)
        return json_response({})

    async def _finish(self, request: Request, groups: list[str]) -> Response:
        upload = self._uploads.pop(groups[0])
        try:
            if groups[1] == "commit":
                data = await asyncio.to_thread(upload.data)
                digest = hashlib.sha256(data).hexdigest()
                if upload.sha256 is not None and digest != upload.sha256:
                    # Runtime checks the digest at commit, and moves nothing into place.
                    return error_response(
                        400, "invalid_request", "The upload's SHA-256 does not match its parts."
                    )
                if upload.archive:
                    await self._unpack(upload.sandbox_id, upload.path, data)
                else:
                    await self._put(upload.sandbox_id, upload.path, data, upload.mode)
        finally:
            upload.close()
        return json_response({})
