"""The file routes of the fake Runtime API: stat, read, write, folder archives, uploads."""

from __future__ import annotations

import io
import re
import tarfile
import tempfile
import uuid
from dataclasses import dataclass, field

from activities.provider import SandboxProvider
from tests.fake_runtime.http import Request, Response, RouteTable, error_response, json_response

CHUNK = 1024 * 1024


@dataclass
class _Upload:
    sandbox_id: str
    path: str
    archive: bool
    parts: dict[int, bytes] = field(default_factory=dict)

    def data(self) -> bytes:
        return b"".join(self.parts[offset] for offset in sorted(self.parts))


class FileRoutes:
    """Files of a sandbox, through the engine's capped read, write and folder upload."""

    def __init__(self, engine: SandboxProvider) -> None:
        self.engine = engine
        self._uploads: dict[str, _Upload] = {}

    def routes(self) -> RouteTable:
        sandbox = r"^/v1/sandboxes/([^/:]+)"
        upload = r"^/v1/sandboxes/[^/:]+/(?:files/archive/)?uploads/([^/:]+)"
        return [
            ("GET", re.compile(sandbox + "/files/stat$"), self._stat),
            ("GET", re.compile(sandbox + "/files/content$"), self._read),
            ("PUT", re.compile(sandbox + "/files/content$"), self._write),
            ("POST", re.compile(sandbox + "/files:chmod$"), self._ignore),
            ("PUT", re.compile(sandbox + "/files/archive$"), self._unarchive),
            ("POST", re.compile(sandbox + "/(files/archive/)?uploads$"), self._begin),
            ("PUT", re.compile(upload + "$"), self._part),
            ("POST", re.compile(upload + ":(commit|abort)$"), self._finish),
        ]

    async def _stat(self, request: Request, groups: list[str]) -> Response:
        path = request.arg("path") or ""
        # A zero cap reads nothing: the engine answers from the file's size alone.
        found = await self.engine.read_file(groups[0], path, 0)
        if found.status == "outside":
            return error_response(403, "permission_denied", f"{path} is outside /workspace.")
        if found.status == "missing":
            return json_response({"exists": False})
        return json_response({"exists": True, "type": "file", "size": found.size, "mode": "644"})

    async def _read(self, request: Request, groups: list[str]) -> Response:
        path = request.arg("path") or ""
        found = await self.engine.read_file(groups[0], path, 64 * CHUNK)
        if found.status != "ok" or found.data is None:
            return error_response(404, "file_not_found", f"{path} does not exist.")
        headers = {
            "content-type": "application/octet-stream",
            "x-content-length": str(len(found.data)),
        }
        return Response(200, found.data, headers)

    async def _write(self, request: Request, groups: list[str]) -> Response:
        await self.engine.write_file(groups[0], request.arg("path") or "", request.body)
        return json_response({"path": request.arg("path"), "size": len(request.body)})

    async def _ignore(self, request: Request, groups: list[str]) -> Response:
        return json_response({})

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
        self._uploads[upload_id] = _Upload(groups[0], body["path"], archive=bool(groups[1]))
        return json_response({"uploadId": upload_id, "chunkBytes": CHUNK, "mode": body.get("mode")})

    async def _part(self, request: Request, groups: list[str]) -> Response:
        self._uploads[groups[0]].parts[int(request.arg("offset") or 0)] = request.body
        return json_response({})

    async def _finish(self, request: Request, groups: list[str]) -> Response:
        upload = self._uploads.pop(groups[0])
        if groups[1] == "commit":
            if upload.archive:
                await self._unpack(upload.sandbox_id, upload.path, upload.data())
            else:
                await self.engine.write_file(upload.sandbox_id, upload.path, upload.data())
        return json_response({})
