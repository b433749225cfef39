"""Run artifacts (profiler traces): upload, list, download. Files live under the artifact
directory in a folder per run key, so no run id or name can point a path outside it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import pathlib
import re
import time
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from fastapi.responses import FileResponse

from nissa_server import queries
from nissa_server.auth import require_read, require_write
from nissa_server.openapi import EXAMPLES, error, ok, ref
from nissa_server.routes.common import json_response, nissa, run_or_404
from nissa_server.schemas import ArtifactInfo
from nissa_server.state import Nissa

router = APIRouter(tags=["artifacts"])
NAME_PATTERN = r"^(?!\.+$)[A-Za-z0-9._-]{1,128}$"
NAME = re.compile(NAME_PATTERN)
# The pattern is for the schema; ``_path`` checks it (pydantic's regex engine has no look-ahead).
ArtifactName = Annotated[str, Path(max_length=128, description="File name: letters, digits, '.', '_', '-', "
                                   "not dots only", json_schema_extra={"pattern": NAME_PATTERN})]
UNAUTHORIZED = {401: error("Missing or wrong bearer token", "missing or wrong bearer token")}


def _path(n: Nissa, run_key: int, name: str) -> pathlib.Path:
    if not NAME.fullmatch(name):
        raise HTTPException(422, f"invalid artifact name {name!r}: use letters, digits, '.', '_', '-'")
    root = n.settings.artifacts_root.resolve()
    path = (root / str(run_key) / name).resolve()
    if not path.is_relative_to(root):
        raise HTTPException(422, f"invalid artifact name {name!r}")
    return path


def _url(run_id: str, name: str) -> str:
    return f"/runs/{run_id}/artifacts/{name}"


@router.put("/runs/{run_id}/artifacts/{name}", status_code=201, summary="Upload an artifact (raw body)",
            dependencies=[Depends(require_write)], response_class=Response,
            openapi_extra={"requestBody": {"required": True, "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
            responses={201: ok(ref(ArtifactInfo), EXAMPLES["artifact"], "Stored"),
                       404: error("No such run", "unknown run 'r-x'"),
                       413: error("Too large", "artifact over 536870912 bytes"),
                       422: error("Invalid name, or an empty body", "invalid artifact name 'a/b'"),
                       **UNAUTHORIZED})
async def upload(request: Request, run_id: str, name: ArtifactName) -> Response:
    n = nissa(request)
    run = run_or_404(n, run_id)
    path = _path(n, run.run_key, name)
    limit = n.settings.max_artifact_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"artifact over {limit} bytes")
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    partial = path.with_name(f".{name}.{os.getpid()}.{id(request)}.part")
    digest, size = hashlib.sha256(), 0
    try:
        with open(partial, "wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise HTTPException(413, f"artifact over {limit} bytes")
                digest.update(chunk)
                await asyncio.to_thread(out.write, chunk)
        if size == 0:
            raise HTTPException(422, "empty artifact: the body has no bytes")
        await asyncio.to_thread(os.replace, partial, path)
    finally:
        partial.unlink(missing_ok=True)
    info = ArtifactInfo(name=name, size=size, sha256=digest.hexdigest(), created_at=time.time(),
                        url=_url(run_id, name))
    await n.store.call(lambda conn: conn.execute(
        "INSERT OR REPLACE INTO artifacts (run_key, name, size, sha256, created_at) VALUES (?,?,?,?,?)",
        (run.run_key, info.name, info.size, info.sha256, info.created_at)))
    return json_response(info, status_code=201)


@router.get("/runs/{run_id}/artifacts", summary="A run's artifacts", dependencies=[Depends(require_read)],
            response_class=Response,
            responses={200: ok({"type": "array", "items": ref(ArtifactInfo)}, [EXAMPLES["artifact"]]),
                       404: error("No such run", "unknown run 'r-x'"), **UNAUTHORIZED})
async def list_artifacts(request: Request, run_id: str) -> Response:
    n = nissa(request)
    run = run_or_404(n, run_id)
    rows = await n.store.read(queries.list_artifacts, run.run_key)
    return json_response([ArtifactInfo(name=name, size=size, sha256=sha, created_at=created,
                                       url=_url(run_id, name)) for name, size, sha, created in rows])


@router.get("/runs/{run_id}/artifacts/{name}", summary="Download an artifact",
            dependencies=[Depends(require_read)], response_class=Response,
            responses={200: {"description": "The file as uploaded",
                             "content": {"application/octet-stream": {"schema": {"type": "string",
                                                                                 "format": "binary"}}}},
                       404: error("No such run or artifact", "unknown artifact 'trace.json'"),
                       422: error("Invalid name", "invalid artifact name 'a b'"), **UNAUTHORIZED})
async def download(request: Request, run_id: str, name: ArtifactName) -> Response:
    n = nissa(request)
    run = run_or_404(n, run_id)
    path = _path(n, run.run_key, name)
    if not path.is_file():
        raise HTTPException(404, f"unknown artifact {name!r}")
    return FileResponse(path, media_type="application/octet-stream", filename=name)
