"""Series and markers of runs, for charts: the list, one name's series downsampled (several runs in one
call), markers of what happened to a run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlencode

from fastapi import HTTPException, Query, Request, Response

from leyline.series import Marker
from nissa_server.access import Access, guarded
from nissa_server.deps import NissaDep, run_or_404
from nissa_server.openapi import Responses, error, ok, ref
from nissa_server.reads import BUSY
from nissa_server.routes.common import json_response
from nissa_server.series import CSV_HEADER, SeriesInfo, SeriesReply, json_body, listing, parse_labels, read_page
from nissa_server.state import Nissa
from nissa_server.store import series_queries

router = guarded(Access.READ, tags=["series"])
T = TypeVar("T")
MAX_OVERLAY = 16
"""Runs one call may overlay (the run in the path and ``runs``)."""
MAX_SERIES = 1000
"""Series of one name (label sets) one run may have in a reply; more are chosen with ``labels``."""
MAX_LISTED = 10_000
"""Series one page of a run's listing holds (a loop that logs a new name each step has millions)."""
ERRORS: Responses = {401: error("Reads need the bearer token (server started with --read-auth)",
                           "missing or wrong bearer token"), 404: error("No such run", "unknown run 'r-x'")}
Axis = Literal["step", "epoch", "round", "ts"]
_CHAR = r"(?:[^,=\\]|\\.)"  # a character of a name, or one escaped with a backslash
_PAIR = rf"{_CHAR}*(?:[^\s,=\\]|\\.){_CHAR}*=(?:[^,\\]|\\.)*"
_LABELS = rf"^\s*({_PAIR})?\s*(,\s*({_PAIR})?\s*)*$"
"""``name=value`` pairs separated by commas (``\\`` escapes a ``,``, ``=`` or ``\\``), spelled out for the schema
(``parse_labels`` checks)."""
_RUNS = rf"^[^,]*(,[^,]*){{0,{MAX_OVERLAY - 1}}}$"


async def charted(n: Nissa, fn: Callable[..., T], *args: Any) -> T:
    """``fn(conn, *args)`` on a reader thread; where the run's events not charted yet are more than one read
    charts for itself, the series pass charts them first (the reads of other runs go on meanwhile)."""
    try:
        return await n.store.read(fn, *args)
    except series_queries.TailTooLong:
        await n.store.series_pass.catch_up()
    try:
        return await n.store.read(fn, *args)
    except series_queries.TailTooLong as err:  # still behind (a backlog, or another server's): said, not read
        raise HTTPException(503, str(err), headers={"Retry-After": "1"}) from None


_LIST_EXAMPLE = [{"key": "epoch_completed.accuracy{env=0}", "name": "epoch_completed.accuracy",
                  "labels": {"env": "0"}, "points": 120,
                  "kind": "epoch_completed"}]
_SERIES_EXAMPLE = {"name": "epoch_completed.accuracy", "x": "step", "series": [
    {"run_id": "r-20250101-abc", "key": "epoch_completed.accuracy{env=0}", "labels": {"env": "0"},
     "x": [16, 32, 48], "y": [0.31, 0.42, 0.47], "points": 3}]}


@router.get("/runs/{run_id}/series", summary="Every series of a run: each numeric field of its events, by label",
            description=f"By key, at most `limit` ({MAX_LISTED} unless told) a page; a full page has a "
                        "`Link: <…>; rel=\"next\"` header with the next page's URL (`after` the last key).",
            response_class=Response,
            responses={200: ok({"type": "array", "items": ref(SeriesInfo)}, _LIST_EXAMPLE), **ERRORS, **BUSY})
async def list_series(
    request: Request, n: NissaDep,
    run_id: str,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED, description="Most series in this page")] = MAX_LISTED,
    after: Annotated[str | None, Query(description="Cursor: only the series whose "
                                       "key sorts after it (the last key of the page before)")] = None,
) -> Response:
    run = await run_or_404(n, run_id)
    async with n.reads.read(request, run.run_id):
        body, last, full = await charted(n, listing, run.run_key, after, limit)
    response = Response(body, media_type="application/json")
    if full:  # maybe more: where the next page starts
        query = urlencode({"limit": limit, "after": last})
        response.headers["Link"] = f'<{request.url.path}?{query}>; rel="next"'
    return response


@router.get("/runs/{run_id}/series/{name:path}", summary="A series, downsampled keeping each bucket's min and max",
            description="Every series called `name` (each label set, or those with all of `labels`) of the run "
                        "and of each run in `runs` (an overlay in one call), on the x axis `x`, with at most "
                        f"`max_points` points each, and at most {MAX_SERIES} series (label sets) a run: more are "
                        "refused (422), to be chosen with `labels`. `after` returns only the points with x above it "
                        "(what a chart lacks). `format=csv` gives `run_id,key,x,y` rows. Series come run by run (the "
                        "order of the path's run, then `runs`), by key; a reply holds at most 8 MiB of them "
                        "(a page of events' bound; one series at least): one that stopped short has a "
                        "`Link: <…>; rel=\"next\"` header with the URL of the rest (`after_run` and `after_key`: the "
                        "run and the key of its last series).",
            response_class=Response,
            responses={200: ok(ref(SeriesReply), _SERIES_EXAMPLE), **ERRORS,
                       404: error("No such run, or an `after_run` that is not one of the runs asked for",
                                  "unknown run 'r-x'"),
                       422: error("Bad parameter", "labels: 'env' is not name=value"), **BUSY})
async def get_series(
    request: Request, n: NissaDep,
    run_id: str,
    name: str,
    x: Annotated[Axis, Query(description="The x axis")] = "step",
    max_points: Annotated[int, Query(ge=10, le=20_000, description="Most points per series")] = 2000,
    after: Annotated[float | None, Query(allow_inf_nan=False, description="Only points with x above it")] = None,
    labels: Annotated[str | None, Query(max_length=1000, description="Only series with these labels: "
                                        "`env=2` or `env=2,rank=0`; a backslash escapes a `,` `=` or backslash in a "
                                        "name or value (`data=a\\,b`)", json_schema_extra={"pattern": _LABELS})] = None,
    runs: Annotated[str | None, Query(max_length=4000, description=f"More runs to overlay, separated by commas "
                                      f"(at most {MAX_OVERLAY})", json_schema_extra={"pattern": _RUNS})] = None,
    format: Annotated[Literal["json", "csv"], Query(description="json, or csv rows")] = "json",
    after_run: Annotated[str | None, Query(max_length=200, description="Cursor (from a `Link` header): the page "
                                           "starts at this run (one of the request's)")] = None,
    after_key: Annotated[str | None, Query(max_length=4000, description="Cursor (from a `Link` header): the "
                                           "page starts after this key of `after_run`")] = None,
) -> Response:
    try:
        wanted = parse_labels(labels)
    except ValueError as err:
        raise HTTPException(422, str(err)) from None
    others = [r.strip() for r in (runs or "").split(",") if r.strip()]
    if len(others) > MAX_OVERLAY:
        raise HTTPException(422, f"runs: at most {MAX_OVERLAY} runs to overlay, got {len(others)}")
    run_ids = list(dict.fromkeys([run_id, *others]))
    start = 0
    if after_run is not None:
        if after_run not in run_ids:  # a cursor of another request: no page of this one starts there
            raise HTTPException(404, f"after_run: {after_run!r} is not one of the runs asked for")
        start = run_ids.index(after_run)
    parts: list[bytes] = []
    budget = n.settings.max_page_bytes
    async with n.reads.client(request):  # a few at a time, a run's one at a time (``nissa_server.reads``)
        for rid in run_ids[start:]:
            run = await run_or_404(n, rid)
            key = after_key if rid == after_run else None
            try:
                async with n.reads.slot(rid):
                    page = await charted(n, read_page, rid, run.run_key, name, x, after, max_points, wanted,
                                         MAX_SERIES, key, budget, format, not parts)
            except series_queries.TooManySeries as err:
                raise HTTPException(422, f"run {rid!r}: {err}") from None
            parts += page.parts
            budget -= page.spent
            if page.more:
                response = _reply(name, x, format, parts)
                query = [(k, v) for k, v in request.query_params.multi_items() if k not in ("after_run", "after_key")]
                query += [("after_run", rid)] + ([("after_key", page.last_key)] if page.last_key is not None else [])
                response.headers["Link"] = f'<{request.url.path}?{urlencode(query)}>; rel="next"'
                return response
    return _reply(name, x, format, parts)


def _reply(name: str, axis: str, fmt: str, parts: list[bytes]) -> Response:
    if fmt == "csv":
        return Response(CSV_HEADER.encode() + b"".join(parts), media_type="text/csv")
    return Response(json_body(name, axis, parts), media_type="application/json")


@router.get("/runs/{run_id}/markers", summary="What happened to a run, to mark on its charts",
            description="Commands applied, completed or failed; anomalies; seeds fossilized and pruned; resumes; "
                        "the end. `after` (on the axis `x`) gives only the later ones.",
            response_class=Response,
            responses={200: ok({"type": "array", "items": ref(Marker)}, [
                {"kind": "command", "label": "debug applied", "step": 120, "epoch": 6, "round": None,
                 "ts": 1.7e9, "env": None, "rank": 0}]), **ERRORS, **BUSY})
async def list_markers(
    request: Request, n: NissaDep,
    run_id: str,
    x: Annotated[Axis, Query(description="The x axis `after` is on")] = "step",
    after: Annotated[float | None, Query(allow_inf_nan=False, description="Only markers with x above it")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="Most markers")] = 2000,
) -> Response:
    run = await run_or_404(n, run_id)
    async with n.reads.read(request, run.run_id):
        return json_response(await charted(n, series_queries.read_markers, run.run_key, x, after, limit))
