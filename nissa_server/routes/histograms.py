"""Distributions of a run over steps (``histogram`` events), one name at a time."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response

from leyline import decode_event
from leyline.payloads_histogram import QUANTILES, HistogramsReply
from nissa_server.deps import NissaDep, require_read, run_or_404
from nissa_server.histograms import downsample, pick, to_csv
from nissa_server.openapi import error, ok, ref
from nissa_server.routes.common import json_response
from nissa_server.store import pages

router = APIRouter(tags=["series"])
READ = [Depends(require_read)]
MAX_EVENTS = 200_000
"""``histogram`` events one request reads at most (the oldest first)."""
_EXAMPLE = {"name": "gradients/fc1.weight", "taken": 1,
            "quantiles": [0.0, 0.07, 0.16, 0.31, 0.5, 0.69, 0.84, 0.93, 1.0],
            "histograms": [{"rank": 0, "step": 100, "epoch": 1, "ts": 1.7e9, "min": -0.02, "max": 0.03, "count": 512,
                            "nonfinite": 0, "bins": [3, 40, 210, 200, 52, 7],
                            "quantiles": [-0.02, -0.01, -0.005, 0.0, 0.003, 0.007, 0.012, 0.018, 0.03]}]}


@router.get("/runs/{run_id}/histograms/{name:path}", summary="One name's distributions over the run's steps",
            description="The distributions called `name` (`run.log` of a `nissa.Histogram`, `run.watch(model, "
                        "histograms=…)`), each with its fixed bins from `min` to `max`, at most `max_steps` a rank, "
                        "evenly spread over the run (the first and the last kept). `format=csv` gives a row per bin: "
                        "`rank,step,ts,bin,low,high,count`.",
            response_class=Response, dependencies=READ,
            responses={200: ok(ref(HistogramsReply), _EXAMPLE),
                       401: error("Reads need the bearer token (server started with --read-auth)", "missing or "
                                  "wrong bearer token"), 404: error("No such run", "unknown run 'r-x'")})
async def get_histograms(
    n: NissaDep,
    run_id: str,
    name: str,
    max_steps: Annotated[int, Query(ge=1, le=5000, description="Most distributions a rank")] = 200,
    rank: Annotated[int | None, Query(ge=0, le=65535, description="Only this rank")] = None,
    format: Annotated[Literal["json", "csv"], Query(description="json, or csv rows")] = "json",
) -> Response:
    run = await run_or_404(n, run_id)
    found, after, after_rank, read = [], 0, None, 0
    while read < MAX_EVENTS:
        page = await n.store.read(pages.events_page, run.run_key, after, min(1000, MAX_EVENTS - read), ["histogram"],
                                  rank, after_rank, n.settings.max_page_bytes)
        found.extend(pick([decode_event(body) for body in page.bodies], name))
        read += len(page.bodies)
        if not page.cut or page.last is None:
            break
        after, after_rank = page.last
    reply = HistogramsReply(name=name, quantiles=list(QUANTILES), histograms=downsample(found, max_steps),
                            taken=len(found))
    if format == "csv":
        return Response(to_csv(reply), media_type="text/csv")
    return json_response(reply)
