"""Small functions shared by the routers."""

from __future__ import annotations

import msgspec
from fastapi import HTTPException, Request, Response

from nissa_server.runs import RunState
from nissa_server.state import Nissa

_encoder = msgspec.json.Encoder()


def nissa(request: Request) -> Nissa:
    return request.app.state.nissa


def json_response(obj: object, status_code: int = 200) -> Response:
    """Encode with msgspec: the response types are msgspec structs, not pydantic models."""
    return Response(_encoder.encode(obj), status_code=status_code, media_type="application/json")


async def run_or_404(n: Nissa, run_id: str) -> RunState:
    run = await n.find_run(run_id)
    if run is None:
        raise HTTPException(404, f"unknown run {run_id!r}")
    return run


async def read_body(request: Request) -> bytes:
    """The request's body, refused (413) past the server's ``max_body_bytes`` before it is all read."""
    limit = nissa(request).settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"body over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"body over {limit} bytes")
    return bytes(body)
