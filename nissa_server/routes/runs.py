"""Runs: the list, one run, its stored events, its commands; deleting one."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlencode

import msgspec
from fastapi import Depends, HTTPException, Query, Request, Response

from leyline import KIND_NAMES, CommandRecord, Event, RunStatus, query
from leyline.events import MAX_INT
from leyline.query import Clause, Field, SortKey
from leyline.runs import RunDetail, RunSummary
from leyline.runs_table import RunsTable, table_columns
from leyline.summaries import RunPatch
from nissa_server import retention
from nissa_server.access import Access, guarded
from nissa_server.deps import (
    KnownRun,
    NissaDep,
    StoreDep,
    decoded,
    run_or_404,
)
from nissa_server.openapi import EXAMPLES, Responses, error, ok, ref
from nissa_server.reads import BUSY
from nissa_server.routes.common import json_response
from nissa_server.schemas import DeletedRun
from nissa_server.state import Nissa
from nissa_server.store import pages, queries, run_meta_sql, runs_page

router = guarded(Access.READ, tags=["runs"])
edits = guarded(Access.WRITE, tags=["runs"])
deletes = guarded(Access.DESTRUCTIVE, tags=["runs"])
MAX_PAGE = 10_000
MAX_RUNS_PAGE = 500
MAX_COLUMNS = 64
"""Metric columns a runs table is asked for at most (``GET /runs-table?columns=``); more are left out."""
_STATUSES = "|".join(s.value for s in RunStatus)
_STATUS_LIST = rf"^\s*({_STATUSES})?(\s*,\s*({_STATUSES})?)*\s*$"
UNAUTHORIZED: Responses = {401: error("Reads need the bearer token (server started with --read-auth)",
                           "missing or wrong bearer token")}
NOT_FOUND: Responses = {404: error("No such run", "unknown run 'r-x'")}


def _with_live_state(n: Nissa, info: RunDetail) -> RunDetail:
    # The database knows other servers' connections by their hold; this server's, from memory (a
    # connection that just closed here is not connected, even before its hold is released).
    run = n.run(info.run_id)
    if run is not None and run.connected:
        info.connected = True
        for rank in info.ranks:
            rank.connected = rank.connected or rank.rank in run.connections
    return info


_Q_DESCRIPTION = ("Only runs matching all its clauses: `project:cifar tag:baseline status:finished,lost name~sweep "
                  "config.lr>=0.01 val_loss<0.5 val_loss.min<0.4` (`-` negates a clause; a metric without `.stat` "
                  "is its best; without a `rank` label, rank 0's series). A mistake is a 400 naming its position.")


def _clauses(q: str | None, status: str | None, name: str | None) -> list[Clause]:
    try:
        clauses = query.parse(q or "")
    except query.QueryError as err:
        raise HTTPException(400, f"q: {err}") from None
    statuses = [s.strip() for s in (status or "").split(",") if s.strip()]
    for s in statuses:
        if s not in RunStatus._value2member_map_:
            raise HTTPException(422, f"status: unknown status {s!r}")
    if statuses:
        clauses.append(Clause(Field("attr", "status"), "=", tuple(statuses)))
    if name:
        clauses.append(Clause(Field("attr", "name"), "~", (name,)))
    return clauses


def _sort_and_metrics(sort: str | None, metrics: str | None) -> tuple[list[SortKey], list[str] | None]:
    try:
        keys = query.parse_sort(sort or "")
    except query.QueryError as err:
        raise HTTPException(400, f"sort: {err}") from None
    if metrics is None:
        return keys, None
    wanted = []
    for at, part in query.split_fields(metrics):
        try:
            field = query.field_of(part, at)
        except query.QueryError as err:
            raise HTTPException(400, f"metrics: {err}") from None
        if field.kind != "metric":
            raise HTTPException(400, f"metrics: position {at}: {part!r} is not a metric")
        wanted.append(field.name)
    return keys, wanted


@dataclass
class RunsQuery:
    """Which runs a page lists, in which order, with which summaries (``GET /runs``, ``GET /runs-table``)."""

    limit: Annotated[int, Query(ge=1, le=MAX_RUNS_PAGE, description="Most runs in this page")] = 100
    offset: Annotated[int, Query(ge=0, le=MAX_INT, description="Runs to skip")] = 0
    q: Annotated[str | None, Query(max_length=query.MAX_QUERY_CHARS, description=_Q_DESCRIPTION)] = None
    sort: Annotated[str | None, Query(max_length=1000, description="Fields separated by commas, `-` for descending: "
                                      "`-val_loss.best`, `config.lr`, `name`, `started` (then newest first)")] = None
    metrics: Annotated[str | None, Query(max_length=4000, description="Only these metrics' summaries, separated by "
                                         "commas (`val_loss,val_acc`)")] = None
    status: Annotated[str | None, Query(max_length=200, description="Only runs with this status, or one of "
                                        "several separated by commas (as `q=status:…`)",
                                        json_schema_extra={"pattern": _STATUS_LIST})] = None
    name: Annotated[str | None, Query(max_length=200, description="Only runs whose name contains it "
                                      "(any case; as `q=name~…`)")] = None

    async def page(self, request: Request, n: Nissa) -> tuple[int, list[RunSummary]]:
        """(runs that match, this page of them), read in ``request``'s turn (``n.reads``)."""
        clauses = _clauses(self.q, self.status, self.name)
        keys, wanted = _sort_and_metrics(self.sort, self.metrics)
        async with n.reads.read(request):
            total, page = await n.store.read(runs_page.page_runs, self.limit, self.offset, clauses, keys,
                                             time.time(), n.server_id, wanted)
        for summary in page:
            run = n.run(summary.run_id)
            summary.connected = summary.connected or (run is not None and run.connected)
        return total, page


PageQuery = Annotated[RunsQuery, Depends()]
_PAGE_MISTAKES: Responses = {400: error("A mistake in q, sort or metrics", "q: position 9: 'x' is not a number"),
                             **UNAUTHORIZED, **BUSY}


@router.get("/runs", summary="Runs found by a query, sorted, a page at a time, each as a summary",
            response_class=Response, description="`limit` runs from `offset` (the `Link` header "
            "names the next and previous pages, `X-Total-Count` the runs that match), newest first unless `sort` says. "
            "Each run is a summary: its config cut (64 entries at most, values cut to 80 characters; the whole "
            "config is on `GET /runs/{run_id}`), its project, group, tags and notes, and `metrics`: its series "
            "summarised (the first 256 by key, those set outright by `run.summary` and those `q` and `sort` name, or "
            "those of `metrics`).",
            responses={200: ok({"type": "array", "items": ref(RunSummary)}, EXAMPLES["run_summaries"]),
                       **_PAGE_MISTAKES})
async def list_runs(request: Request, n: NissaDep, page: PageQuery) -> Response:
    total, runs = await page.page(request, n)
    response = json_response(runs)
    response.headers["X-Total-Count"] = str(total)
    limit, offset = page.limit, page.offset
    links = [(rel, at) for rel, at in (("next", offset + limit), ("prev", max(0, offset - limit)))
             if (rel == "next" and at < total) or (rel == "prev" and offset > 0)]
    if links:
        base = {k: v for k, v in (("q", page.q), ("sort", page.sort), ("metrics", page.metrics),
                                  ("status", page.status), ("name", page.name)) if v}
        response.headers["Link"] = ", ".join(
            f'<{request.url.path}?{urlencode({**base, "limit": limit, "offset": at})}>; rel="{rel}"'
            for rel, at in links)
    return response


@router.get("/runs-table", summary="A page of runs as `GET /runs` lists it, with the columns a runs table shows",
            response_class=Response, description="The runs of `GET /runs` with the same "
            "parameters, how many match, and `columns`: the metric columns every runs table shows of this page by "
            "default (the series its runs share, each by its name in the filter language: `val_loss` is rank 0's "
            "in a run of several ranks too) or those `columns` names, the config keys that tell its runs apart, and "
            "each of its series' name in the filter language: the column that shows it (`leyline.runs_table`: the "
            "web page renders them, the console computes the same).",
            responses={200: ok(ref(RunsTable), EXAMPLES["runs_table"]), **_PAGE_MISTAKES})
async def runs_table(request: Request, n: NissaDep, page: PageQuery, columns: Annotated[str | None, Query(
        max_length=4000, description="The metric columns shown, separated by commas (`val_loss,acc{env=0}`; "
        "`val_loss{rank=0}` is `val_loss`); without it, those the runs share")] = None) -> Response:
    total, runs = await page.page(request, n)
    asked = [part for _, part in query.split_fields(columns or "")][:MAX_COLUMNS]
    return json_response(RunsTable(runs=runs, total=total, columns=table_columns(runs, asked)))


_PATCH_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": ref(RunPatch), "examples": {"tags": {"value": {"tags": ["baseline", "lr-sweep"]}},
                                          "notes": {"value": {"notes": "diverged at step 4k", "group": "sweep-2"}}}}}}}
Patch = Annotated[RunPatch, decoded(msgspec.json.Decoder(RunPatch), "invalid change")]


@edits.patch("/runs/{run_id}", summary="Change a run's tags, notes, group or project",
             response_class=Response, openapi_extra=_PATCH_BODY,
              description="The fields given replace the run's (`tags`: all of them). Needs the token when the server "
                          "has one. Answers the run as `GET /runs/{run_id}` does.",
              responses={200: ok(ref(RunDetail), EXAMPLES["run"]), **NOT_FOUND,
                         401: error("Missing or wrong bearer token", "missing or wrong bearer token"),
                         413: error("Body too large", "body over 65536 bytes"),
                         422: error("Invalid change", "invalid change: Expected `str` matching regex ... - at "
                                                      "`$.tags[0]`")})
async def patch_run(n: NissaDep, run: KnownRun, change: Patch) -> Response:
    tags = None if change.tags is None else list(dict.fromkeys(change.tags))
    patched = await n.store.call(functools.partial(run_meta_sql.patch, run_key=run.run_key, tags=tags,
                                                   notes=change.notes, group=change.group, project=change.project))
    if not patched:
        raise HTTPException(404, f"unknown run {run.run_id!r}")
    return await _run_reply(n, run.run_id)


@router.get("/runs/{run_id}", summary="One run: status, config, last seq per rank, counts per kind, bytes stored",
            response_class=Response,
            responses={200: ok(ref(RunDetail), EXAMPLES["run"]), **NOT_FOUND, **UNAUTHORIZED, **BUSY})
async def get_run(request: Request, n: NissaDep, run_id: str) -> Response:
    async with n.reads.read(request, run_id):
        return await _run_reply(n, run_id)


async def _run_reply(n: Nissa, run_id: str) -> Response:
    """The run as ``GET /runs/{run_id}`` answers it (404 where it is unknown)."""
    info = await n.store.read(queries.get_run, run_id, time.time(), n.server_id)
    if info is None:
        raise HTTPException(404, f"unknown run {run_id!r}")
    return json_response(_with_live_state(n, info))


@deletes.delete("/runs/{run_id}", summary="Delete a run that is not live: its events, commands and artifacts",
                response_class=Response,
               responses={200: ok(ref(DeletedRun), EXAMPLES["deleted"], "Deleted"), **NOT_FOUND,
                          401: error("Missing or wrong bearer token", "missing or wrong bearer token"),
                          403: error("The server has no token and was not started --open",
                                     "this server has no token, so it does not delete: …"),
                          409: error("The run is live", "run 'r-x' is live: stop its trainer first, or wait "
                                                        "until it is lost")})
async def delete_run(n: NissaDep, run: KnownRun) -> Response:
    try:
        deleted = await retention.delete_run(n, run)
    except retention.RunIsLive as err:
        raise HTTPException(409, str(err)) from None
    if deleted is None:  # deleted meanwhile, by another request
        raise HTTPException(404, f"unknown run {run.run_id!r}")
    return json_response(deleted)


_KIND_NAMES = "|".join(sorted(KIND_NAMES))
_KIND_LIST = rf"^\s*({_KIND_NAMES})?(\s*,\s*({_KIND_NAMES})?)*\s*$"
"""One kind or several separated by commas, spelled out for the schema (``_kinds`` checks, with a
shorter message than the pattern's)."""


def _kinds(kind: str | None) -> list[str] | None:
    if not kind:
        return None
    names = [k.strip() for k in kind.split(",") if k.strip()]
    for name in names:
        if name not in KIND_NAMES:
            raise HTTPException(422, f"unknown kind {name!r}")
    return names or None


@router.get("/runs/{run_id}/events", summary="Stored events after a cursor, in (seq, rank) order",
            
            description="Page through a run with the (seq, rank) of the last event received: `after_seq=S"
                        "&after_rank=R` returns the events after it, so a run with several ranks (the "
                        "server's own events are rank -1) is read whole, each event once. `after_seq` alone "
                        "skips every event with seq S: enough when only one rank is read (`rank=`). A page "
                        "holds at most `limit` events and 8 MiB of them (always one, if there is one); a page "
                        "that stopped there has a `Link: <…>; rel=\"next\"` header with the next page's URL. "
                        "Read on until a page is empty (or has no `Link`).",
            response_class=Response,
            responses={200: ok({"type": "array", "items": ref(Event)}, EXAMPLES["events"][:3]),
                       **NOT_FOUND, **UNAUTHORIZED, **BUSY})
async def list_events(
    request: Request, n: NissaDep,
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
    run = await run_or_404(n, run_id)
    async with n.reads.read(request, run.run_id):  # a page is up to ``max_page_bytes``: a costly read
        page = await n.store.read(pages.events_page, run.run_key, after_seq, limit, _kinds(kind), rank, after_rank,
                                  n.settings.max_page_bytes)
    headers = {}
    if page.cut and page.last is not None:  # where the next page starts, the other parameters as they were
        query = dict(request.query_params, after_seq=str(page.last[0]), after_rank=str(page.last[1]))
        headers["Link"] = f'<{request.url.path}?{urlencode(query)}>; rel="next"'
    # Stored bodies are already validated JSON envelopes: join them, no re-encoding.
    return Response(b"[" + b",".join(page.bodies) + b"]", media_type="application/json", headers=headers)


@router.get("/runs/{run_id}/commands", summary="Every command sent to a run, oldest first",
            response_class=Response,
            responses={200: ok({"type": "array", "items": ref(CommandRecord)}, EXAMPLES["commands"]),
                       **NOT_FOUND, **UNAUTHORIZED})
async def list_commands(store: StoreDep, run: KnownRun) -> Response:
    return json_response(await store.read(queries.list_commands, run.run_key))
