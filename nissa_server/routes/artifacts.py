"""Run artifacts (profiler traces): upload, list, download. Files live under the artifact
directory in a folder per run key, so no run id or name can point a path outside it."""

from __future__ import annotations

import asyncio
import hashlib
import pathlib
import re
import time
import uuid
from typing import Annotated

from fastapi import HTTPException, Path, Request, Response
from fastapi.responses import FileResponse

from leyline.frames import STREAM_SECRET_HEADER
from leyline.ids import ARTIFACT_NAME_PATTERN, ARTIFACT_NAME_RULE, MAX_ARTIFACT_NAME
from nissa_server import artifact_files, ownership
from nissa_server.access import Access, guarded
from nissa_server.artifact_files import Quota, Refused
from nissa_server.deps import KnownRun, NissaDep, StoreDep, run_or_404
from nissa_server.openapi import EXAMPLES, Responses, error, ok, ref
from nissa_server.routes.common import json_response
from nissa_server.runs import RunState
from nissa_server.schemas import ArtifactInfo
from nissa_server.state import Nissa
from nissa_server.store import queries

router = guarded(Access.READ, tags=["artifacts"])
uploads = guarded(Access.WRITE, tags=["artifacts"])
NAME = re.compile(ARTIFACT_NAME_PATTERN)
# The pattern is for the schema; ``_path`` checks it (pydantic's regex engine has no look-ahead).
ArtifactName = Annotated[str, Path(max_length=MAX_ARTIFACT_NAME, description=f"File name: {ARTIFACT_NAME_RULE}",
                                   json_schema_extra={"pattern": ARTIFACT_NAME_PATTERN})]
UNAUTHORIZED: Responses = {401: error("Missing or wrong bearer token", "missing or wrong bearer token")}


_STORED_NAME = re.compile(rf"^[A-Za-z0-9._-]{{1,{MAX_ARTIFACT_NAME}}}$(?!\n)")
"""The names an older server stored (before ``-x`` and device names were refused): still downloadable."""


def _refused(name: str) -> HTTPException:
    return HTTPException(422, f"invalid artifact name {name[:40]!r}: {ARTIFACT_NAME_RULE}")


def _path(n: Nissa, run_key: int, name: str) -> pathlib.Path:
    if len(name) > MAX_ARTIFACT_NAME or not NAME.search(name):
        raise _refused(name)
    return _inside(n, run_key, name)


def _inside(n: Nissa, run_key: int, name: str) -> pathlib.Path:
    root = n.settings.artifacts_root.resolve()
    path = (root / str(run_key) / name).resolve()
    if not path.is_relative_to(root):
        raise HTTPException(422, f"invalid artifact name {name!r}")
    return path


def _url(run_id: str, name: str) -> str:
    return f"/runs/{run_id}/artifacts/{name}"


def _check_secret(request: Request, run: RunState) -> None:
    """Only the run's own trainer (its stream secret) writes its artifacts."""
    given = request.headers.get(STREAM_SECRET_HEADER)
    if not given:
        raise HTTPException(403, f"an upload needs the run's stream secret in {STREAM_SECRET_HEADER}")
    try:
        ownership.check(run.secret_hash, ownership.secret_hash(given), run.run_id)
    except ownership.NotOwner as err:
        raise HTTPException(403, str(err)) from None


@uploads.put("/runs/{run_id}/artifacts/{name}", status_code=201, summary="Upload an artifact (raw body)",
             response_class=Response,
            description=f"Only the run's own trainer may: the `{STREAM_SECRET_HEADER}` header carries the run's "
                        "stream secret. A run holds at most 200 artifacts and 2 GiB of them (server settings).",
            openapi_extra={"requestBody": {"required": True, "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
            responses={201: ok(ref(ArtifactInfo), EXAMPLES["artifact"], "Stored"),
                       403: error("Not the run's stream secret", "stream secret does not match run r-x"),
                       404: error("No such run", "unknown run 'r-x'"),
                       413: error("Too large, or the run's quota is used up", "artifact over 536870912 bytes"),
                       422: error("Invalid name, or an empty body", "invalid artifact name 'a/b'"),
                       **UNAUTHORIZED})
async def upload(request: Request, n: NissaDep, run_id: str, name: ArtifactName) -> Response:
    run = await run_or_404(n, run_id)
    path = _path(n, run.run_key, name)
    _check_secret(request, run)
    quota = Quota(n.settings.max_run_artifacts, n.settings.max_run_artifact_bytes)
    left = artifact_files.room(quota, *await n.store.read(artifact_files.held, run.run_key, name), run_id)
    if isinstance(left, Refused):
        raise HTTPException(left.status, left.reason)
    limit = min(n.settings.max_artifact_bytes, left)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, _over(n, limit))
    spool = n.settings.artifacts_root / artifact_files.SPOOL
    await asyncio.to_thread(spool.mkdir, parents=True, exist_ok=True)
    partial = spool / f"{run.run_key}-{uuid.uuid4().hex}.part"
    digest, size = hashlib.sha256(), 0
    try:
        with open(partial, "wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise HTTPException(413, _over(n, limit))
                digest.update(chunk)
                await asyncio.to_thread(out.write, chunk)
        if size == 0:
            raise HTTPException(422, "empty artifact: the body has no bytes")
        info = ArtifactInfo(name=name, size=size, sha256=digest.hexdigest(), created_at=time.time(),
                            url=_url(run_id, name))
        row = (info.name, info.size, info.sha256, info.created_at)
        refused = await n.store.call(lambda conn: artifact_files.land(conn, run.run_key, run_id, partial, path, row,
                                                                      quota))
    finally:
        partial.unlink(missing_ok=True)
    if refused is not None:
        raise HTTPException(refused.status, refused.reason)
    return json_response(info, status_code=201)


def _over(n: Nissa, limit: int) -> str:
    if limit < n.settings.max_artifact_bytes:
        return f"artifact over the {limit} bytes left of this run's quota"
    return f"artifact over {limit} bytes"


@router.get("/runs/{run_id}/artifacts", summary="A run's artifacts",
            response_class=Response,
            responses={200: ok({"type": "array", "items": ref(ArtifactInfo)}, [EXAMPLES["artifact"]]),
                       404: error("No such run", "unknown run 'r-x'"), **UNAUTHORIZED})
async def list_artifacts(store: StoreDep, run: KnownRun) -> Response:
    rows = await store.read(queries.list_artifacts, run.run_key)
    return json_response([ArtifactInfo(name=name, size=size, sha256=sha, created_at=created,
                                       url=_url(run.run_id, name)) for name, size, sha, created in rows])


@router.get("/runs/{run_id}/artifacts/{name}", summary="Download an artifact",
            response_class=Response,
            responses={200: {"description": "The file as uploaded",
                             "content": {"application/octet-stream": {"schema": {"type": "string",
                                                                                 "format": "binary"}}}},
                       404: error("No such run or artifact", "unknown artifact 'trace.json'"),
                       422: error("Invalid name", "invalid artifact name 'a b'"), **UNAUTHORIZED})
async def download(n: NissaDep, run_id: str, name: ArtifactName) -> Response:
    """A name the rule refuses is served only if an older server stored it, saved as ``_<name>`` (no option to a
    command, no Windows device)."""
    run = await run_or_404(n, run_id)
    if NAME.search(name):
        save_as = name
    elif _STORED_NAME.search(name) is None or not await n.store.read(artifact_files.stored, run.run_key, name):
        raise _refused(name)
    else:
        save_as = f"_{name}"
    path = _inside(n, run.run_key, name)  # the name's length is bound by ``ArtifactName`` and ``_STORED_NAME``
    if not path.is_file():
        raise HTTPException(404, f"unknown artifact {name!r}")
    return FileResponse(path, media_type="application/octet-stream", filename=save_as)
