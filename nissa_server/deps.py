"""The routes' typed dependencies (FastAPI's ``Depends``): the server's state, its store and settings, a run by
its id, and a request body decoded by the contract's own msgspec
type. A route names what it needs in its
signature (``n: NissaDep``, ``run: KnownRun``) instead of looking it up on the app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from fastapi import Depends, HTTPException, Request
from starlette.requests import HTTPConnection

from leyline.codec import in_words
from nissa_server.runs import RunState
from nissa_server.settings import Settings
from nissa_server.state import Nissa
from nissa_server.store import Store


def get_nissa(connection: HTTPConnection) -> Nissa:
    """Everything a route needs, created with the app (``create_app``); a request or a websocket."""
    nissa: Nissa = connection.app.state.nissa
    return nissa


NissaDep = Annotated[Nissa, Depends(get_nissa)]


def get_settings(n: NissaDep) -> Settings:
    return n.settings


def get_store(n: NissaDep) -> Store:
    return n.store


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]


async def run_or_404(n: Nissa, run_id: str) -> RunState:
    run = await n.find_run(run_id)
    if run is None:
        raise HTTPException(404, f"unknown run {run_id!r}")
    return run


async def known_run(run_id: str, n: NissaDep) -> RunState:
    """The run of the path's ``run_id``; a 404 where the server has none."""
    return await run_or_404(n, run_id)


KnownRun = Annotated[RunState, Depends(known_run)]


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) past ``limit`` bytes before it is all read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"body over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"body over {limit} bytes")
    return bytes(body)


def decoded(decoder: msgspec.json.Decoder[Any], what: str,
            explain: Callable[[object], str | None] | None = None) -> Any:
    """A dependency that reads the JSON body (bounded by ``max_body_bytes``) and decodes it with ``decoder`` (the
    contract's type): a 413 past the bound, a 422 with msgspec's own message after ``what`` (and what ``explain``
    adds, given the body as plain JSON) where it is not one."""

    async def decode(request: Request, settings: SettingsDep) -> Any:
        body = await read_body(request, settings.max_body_bytes)
        try:
            return decoder.decode(body)
        except msgspec.DecodeError as err:
            hint = _hint(explain, body) if isinstance(err, msgspec.ValidationError) else None
            raise HTTPException(422, f"{what}: {in_words(err, body)}" + (f" ({hint})" if hint else "")) from None

    return Depends(decode)


def _hint(explain: Callable[[object], str | None] | None, body: bytes) -> str | None:
    """What ``explain`` says of a body that is JSON but not the route's type (None: nothing, or JSON too deep
    to read as plain JSON either)."""
    if explain is None:
        return None
    try:
        return explain(msgspec.json.decode(body))
    except (msgspec.DecodeError, RecursionError):  # msgspec's untyped decoder recurses into nested arrays
        return None
