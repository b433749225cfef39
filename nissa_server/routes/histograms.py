"""Distributions of a run over steps (``histogram`` events), one name at a time."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import HTTPException, Query, Request, Response

from leyline.payloads_histogram import HISTOGRAM_COUNTS, DistributionNames, HistogramsReply, distribution_order
from nissa_server.access import Access, guarded
from nissa_server.deps import NissaDep, run_or_404
from nissa_server.histograms import MAX_READ_EVENTS, TooMuchWork, read_histograms
from nissa_server.openapi import error, ok, ref
from nissa_server.reads import BUSY
from nissa_server.routes.common import json_response
from nissa_server.store import series_queries

router = guarded(Access.READ, tags=["series"])
_EXAMPLE = {"name": "gradients/fc1.weight", "taken": 1,
            "quantiles": [0.0, 0.07, 0.16, 0.31, 0.5, 0.69, 0.84, 0.93, 1.0],
            "histograms": [{"rank": 0, "step": 100, "epoch": 1, "ts": 1.7e9, "min": -0.02, "max": 0.03, "count": 512,
                            "nonfinite": 0, "bins": [3, 40, 210, 200, 52, 7],
                            "quantiles": [-0.02, -0.01, -0.005, 0.0, 0.003, 0.007, 0.012, 0.018, 0.03]}]}


MAX_NAMES = 100_000
"""Distribution names one listing reads at most."""


@router.get("/runs/{run_id}/histograms", summary="A page of the run's distribution names",
            description="The names of the run's distributions, a loop's own first and a debug window's "
                        "(`debug/…`) after them, each by name: the order the web page and the console show them "
                        "in. `q` keeps the names that hold it (any case); `offset` and `limit` pick a page; "
                        "`total` counts the names that match.",
            response_class=Response,
            responses={200: ok(ref(DistributionNames), {"names": ["acts", "debug/mlp/gradients/0.weight"],
                                                        "total": 2}),
                       401: error("Reads need the bearer token (server started with --read-auth)", "missing or "
                                  "wrong bearer token"), 404: error("No such run", "unknown run 'r-x'"), **BUSY})
async def list_distributions(
    request: Request, n: NissaDep,
    run_id: str,
    q: Annotated[str, Query(max_length=200, description="Only names that hold this text (any case)")] = "",
    offset: Annotated[int, Query(ge=0, le=MAX_NAMES, description="Names to skip")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Most names in this page")] = 100,
) -> Response:
    run = await run_or_404(n, run_id)
    async with n.reads.read(request, run.run_id):
        found = await n.store.read(series_queries.label_values, run.run_key, HISTOGRAM_COUNTS, "histogram",
                                   MAX_NAMES)
    wanted = q.casefold()
    names = sorted((name for name in found if wanted in name.casefold()), key=distribution_order)
    return json_response(DistributionNames(names=names[offset:offset + limit], total=len(names)))


@router.get("/runs/{run_id}/histograms/{name:path}", summary="One name's distributions over the run's steps",
            description="The distributions called `name` (`run.log` of a `nissa.Histogram`, `run.watch(model, "
                        "histograms=…)`), each with its fixed bins from `min` to `max`, at most `max_steps` a rank, "
                        "evenly spread over the run (the first and the last kept). `format=csv` gives a row per bin: "
                        "`rank,step,ts,bin,low,high,count`. A read that would decode more than "
                        f"{MAX_READ_EVENTS} events, or more bytes of them than the server's `max_read_bytes` (64 MiB "
                        "unless told), is refused (422) with the `max_steps` (or `rank`) that fits.",
            response_class=Response,
            responses={200: ok(ref(HistogramsReply), _EXAMPLE),
                       401: error("Reads need the bearer token (server started with --read-auth)", "missing or "
                                  "wrong bearer token"), 404: error("No such run", "unknown run 'r-x'"),
                       422: error("More than one request may decode", "'weights/fc1': this read would decode 900 "
                                  "events (170 MiB), more than one request may (20000 events, 64 MiB): ask for fewer "
                                  "steps (max_steps=338)"), **BUSY})
async def get_histograms(
    request: Request, n: NissaDep,
    run_id: str,
    name: str,
    max_steps: Annotated[int, Query(ge=1, le=5000, description="Most distributions a rank")] = 200,
    rank: Annotated[int | None, Query(ge=0, le=65535, description="Only this rank")] = None,
    format: Annotated[Literal["json", "csv"], Query(description="json, or csv rows")] = "json",
) -> Response:
    run = await run_or_404(n, run_id)
    try:
        async with n.reads.read(request, run.run_id):
            body = await n.store.read(read_histograms, run.run_key, name, rank, max_steps, format,
                                      n.settings.max_read_bytes)
    except TooMuchWork as err:
        raise HTTPException(422, str(err)) from None
    return Response(body, media_type="text/csv" if format == "csv" else "application/json")
