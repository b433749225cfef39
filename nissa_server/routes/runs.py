"""Runs: the list, one run, its stored events, its commands; deleting one."""

from __future__ import annotations

import time
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response

from leyline import CommandRecord, Event, EventKind, RunStatus
from leyline.events import MAX_INT
from nissa_server import retention
from nissa_server.auth import require_read, require_write
from nissa_server.openapi import EXAMPLES, error, ok, ref
from nissa_server.routes.common import json_response, nissa, run_or_404
from nissa_server.schemas import DeletedRun, RunInfo
from nissa_server.store import queries, runs_page
from nissa_server.store.runs_page import RunSummary

router = APIRouter(tags=["runs"])
READ = [Depends(require_read)]
MAX_PAGE = 10_000
MAX_RUNS_PAGE = 500
_STATUSES = "|".join(s.value for s in RunStatus)
_STATUS_LIST = rf"^\s*({_STATUSES})?(\s*,\s*({_STATUSES})?)*\s*$"
UNAUTHORIZED = {401: error("Reads need the bearer token (server started with --read-auth)",
                           "missing or wrong bearer token")}
NOT_FOUND = {404: error("No such run", "unknown run 'r-x'")}


def _with_live_state(request: Request, info: RunInfo) -> RunInfo:
    # The database knows other servers' connections by their hold; this server's, from memory (a
    # connection that just closed here is not connected, even before its hold is released).
    run = nissa(request).run(info.run_id)
    if run is not None and run.connected:
        info.connected = True
        for rank in info.ranks:
            rank.connected = rank.connected or rank.rank in run.connections
    return info


@router.get("/runs", summary="Runs, newest first, a page at a time, each as a summary", response_class=Response,
            dependencies=READ, description="`limit` runs from `offset` (the `Link` header names the next and "
            "previous pages, `X-Total-Count` the runs that match). Each run is a summary, its config cut to "
            "`params` (64 entries at most, values cut to 80 characters): the full config is on `GET /runs/{run_id}`.",
            responses={200: ok({"type": "array", "items": ref(RunSummary)}, EXAMPLES["run_summaries"]),
                       **UNAUTHORIZED})
async def list_runs(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS_PAGE, description="Most runs in this page")] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_INT, description="Runs to skip (newest first)")] = 0,
    status: Annotated[str | None, Query(max_length=200, description="Only runs with this status, or one of "
                                        "several separated by commas", json_schema_extra={"pattern": _STATUS_LIST})] = None,
    name: Annotated[str | None, Query(max_length=200, description="Only runs whose name contains it "
                                      "(any case)")] = None,
) -> Response:
    n = nissa(request)
    statuses = [s.strip() for s in (status or "").split(",") if s.strip()] or None
    for s in statuses or ():
        if s not in RunStatus._value2member_map_:
            raise HTTPException(422, f"status: unknown status {s!r}")
    total, page = await n.store.read(runs_page.page_runs, limit, offset, statuses, name, time.time(), n.server_id)
    for summary in page:
        run = n.run(summary.run_id)
        summary.connected = summary.connected or (run is not None and run.connected)
    response = json_response(page)
    response.headers["X-Total-Count"] = str(total)
    links = [(rel, at) for rel, at in (("next", offset + limit), ("prev", max(0, offset - limit)))
             if (rel == "next" and at < total) or (rel == "prev" and offset > 0)]
    if links:
        base = {k: v for k, v in (("status", status), ("name", name)) if v}
        response.headers["Link"] = ", ".join(
            f'<{request.url.path}?{urlencode({**base, "limit": limit, "offset": at})}>; rel="{rel}"'
            for rel, at in links)
    return response


@router.get("/runs/{run_id}", summary="One run: status, config, last seq per rank, counts per kind, bytes stored",
            response_class=Response, dependencies=READ,
            responses={200: ok(ref(RunInfo), EXAMPLES["run"]), **NOT_FOUND, **UNAUTHORIZED})
async def get_run(request: Request, run_id: str) -> Response:
    n = nissa(request)
    info = await n.store.read(queries.get_run, run_id, time.time(), n.server_id)
    if info is None:
        raise HTTPException(404, f"unknown run {run_id!r}")
    return json_response(_with_live_state(request, info))


@router.delete("/runs/{run_id}", summary="Delete a run that is not live: its events, commands and artifacts",
               response_class=Response, dependencies=[Depends(require_write)],
               responses={200: ok(ref(DeletedRun), EXAMPLES["deleted"], "Deleted"), **NOT_FOUND,
                          401: error("Missing or wrong bearer token", "missing or wrong bearer token"),
                          409: error("The run is live", "run 'r-x' is live: stop its trainer first, or wait "
                                                        "until it is lost")})
async def delete_run(request: Request, run_id: str) -> Response:
    n = nissa(request)
    run = await run_or_404(n, run_id)
    try:
        deleted = await retention.delete_run(n, run)
    except retention.RunIsLive as err:
        raise HTTPException(409, str(err)) from None
    if deleted is None:  # deleted meanwhile, by another request
        raise HTTPException(404, f"unknown run {run_id!r}")
    return json_response(deleted)


_KIND_NAMES = "|".join(sorted(k.value for k in EventKind))
_KIND_LIST = rf"^\s*({_KIND_NAMES})?(\s*,\s*({_KIND_NAMES})?)*\s*$"
"""One kind or several separated by commas, spelled out for the schema (``_kinds`` checks, with a
shorter message than the pattern's)."""


def _kinds(kind: str | None) -> list[str] | None:
    if not kind:
        return None
    names = [k.strip() for k in kind.split(",") if k.strip()]
    for name in names:
        if name not in EventKind._value2member_map_:
            raise HTTPException(422, f"unknown kind {name!r}")
    return names or None


@router.get("/runs/{run_id}/events", summary="Stored events after a cursor, in (seq, rank) order",
            dependencies=READ,
            description="Page through a run with the (seq, rank) of the last event received: `after_seq=S"
                        "&after_rank=R` returns the events after it, so a run with several ranks (the "
                        "server's own events are rank -1) is read whole, each event once. `after_seq` alone "
                        "skips every event with seq S: enough when only one rank is read (`rank=`).",
            response_class=Response,
            responses={200: ok({"type": "array", "items": ref(Event)}, EXAMPLES["events"][:3]),
                       **NOT_FOUND, **UNAUTHORIZED})
async def list_events(
    request: Request,
    run_id: str,
    after_seq: Annotated[int, Query(ge=0, le=MAX_INT, description="Cursor: only events after this seq "
                                    "(and, with after_rank, after this seq's events up to that rank)")] = 0,
    after_rank: Annotated[int | None, Query(ge=-1, le=queries.MAX_RANK,
                                            description="Cursor, with after_seq: the rank of the last event "
                                                        "received")] = None,
    kind: Annotated[str | None, Query(description="Event kind, or several separated by commas",
                                      json_schema_extra={"pattern": _KIND_LIST})] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Most events in this page")] = 1000,
    rank: Annotated[int | None, Query(ge=-1, le=queries.MAX_RANK,
                                      description="Only this rank (-1: the server's)")] = None,
) -> Response:
    n = nissa(request)
    run = await run_or_404(n, run_id)
    bodies = await n.store.read(queries.events_page, run.run_key, after_seq, limit, _kinds(kind), rank, after_rank)
    # Stored bodies are already validated JSON envelopes: join them, no re-encoding.
    return Response(b"[" + b",".join(bodies) + b"]", media_type="application/json")


@router.get("/runs/{run_id}/commands", summary="Every command sent to a run, oldest first",
            response_class=Response, dependencies=READ,
            responses={200: ok({"type": "array", "items": ref(CommandRecord)}, EXAMPLES["commands"]),
                       **NOT_FOUND, **UNAUTHORIZED})
async def list_commands(request: Request, run_id: str) -> Response:
    n = nissa(request)
    run = await run_or_404(n, run_id)
    return json_response(await n.store.read(queries.list_commands, run.run_key))
