"""Runs side by side for the runs tables: rows of groups (count, mean ± SD of each metric), a series' band
over a group's runs, the diff of several configs."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query, Request, Response

from leyline import query
from leyline.groups import BandsReply, ConfigDiff, GroupsReply
from leyline.run_keys import run_key
from leyline.series import parse_key
from nissa_server.access import Access, guarded
from nissa_server.deps import NissaDep, run_or_404
from nissa_server.groups import Member, band, config_diff, group_rows
from nissa_server.openapi import Responses, error, ok, ref
from nissa_server.reads import BUSY
from nissa_server.routes.common import json_response
from nissa_server.routes.series import Axis, charted
from nissa_server.series import shape
from nissa_server.store import queries, ranks_sql, run_groups_sql, series_queries
from nissa_server.store.conn import Conn
from nissa_server.store.series_queries import SeriesPage

router = guarded(Access.READ, tags=["runs"])
MAX_BAND_RUNS = 200
"""Runs one band is drawn over (a group row names at most as many)."""
MAX_DIFF_RUNS = 50
MAX_GROUPED_RUNS = 20_000
"""Runs a grouping reads at most (the newest that match)."""
MAX_GROUP_METRICS = 32
MAX_BAND_SERIES = 64
"""Label sets of one name a band reply holds (an env per line)."""
ERRORS: Responses = {401: error("Reads need the bearer token (server started with --read-auth)",
                           "missing or wrong bearer token"), 404: error("No such run", "unknown run 'r-x'"),
          422: error("Bad parameter", "runs: at most 200 runs, got 201")}
_RUNS_DOC = "Run ids separated by commas"


def _list_pattern(most: int) -> str:
    """At most ``most`` items separated by commas, spelled out for the schema."""
    return rf"^[^,]*(,[^,]*){{0,{most - 1}}}$"


def _run_ids(runs: str, most: int) -> list[str]:
    """Each run named once, in order (blanks left out: none named gives an empty answer)."""
    ids = list(dict.fromkeys(r.strip() for r in runs.split(",") if r.strip()))
    if len(ids) > most:
        raise HTTPException(422, f"runs: at most {most} runs, got {len(ids)}")
    return ids


def _metrics(text: str) -> list[tuple[str, str, str]]:
    """``val_loss.best,acc`` → (as asked, series key, statistic) each."""
    out = []
    for _, part in query.split_fields(text):
        try:
            field = query.field_of(part)
        except query.QueryError as err:
            raise HTTPException(400, f"metrics: {part!r}: {err.reason}") from None
        if field.kind != "metric":
            raise HTTPException(400, f"metrics: {part!r} is not a metric")
        out.append((part, field.name, field.stat))
    if len(out) > MAX_GROUP_METRICS:
        raise HTTPException(422, f"metrics: at most {MAX_GROUP_METRICS}, got {len(out)}")
    return out


@router.get("/run-groups", summary="The runs a query finds, grouped: count, mean ± SD of each metric",
            description="The runs matching `q` (the filter language of `GET /runs`; the newest "
                        f"{MAX_GROUPED_RUNS:,} at most), a row per value of `by` (`group`, `project` or "
                        "`config.KEY`; runs without it in a row of their own, value null): how many runs, their ids "
                        "(the first 200, newest first), and for each metric of `metrics` (`val_loss.best,acc.last`) "
                        "the mean, sample standard deviation, min and max over the group's runs that have it.",
            response_class=Response,
            responses={200: ok(ref(GroupsReply), {"by": "config.lr", "runs": 6, "groups": [
                {"value": 0.01, "count": 2, "run_ids": ["r-a", "r-b"], "metrics": {"val_loss.best": {
                    "n": 2, "mean": 0.41, "sd": 0.014, "min": 0.4, "max": 0.42}}}]}),
                       400: error("A mistake in q or metrics", "q: position 9: 'x' is not a number"), **ERRORS})
async def get_groups(
    n: NissaDep,
    by: Annotated[str, Query(max_length=300, pattern=r"^(group|project|config\..+)$",
                             description="`group`, `project` or `config.KEY`")],
    q: Annotated[str | None, Query(max_length=query.MAX_QUERY_CHARS, description="Only runs matching it")] = None,
    metrics: Annotated[str, Query(max_length=4000, description="Metric columns, separated by commas (a series' "
                                  "labels may hold commas: `loss{env=0,split=val}.best`)")] = "",
) -> Response:
    try:
        clauses = query.parse(q or "")
    except query.QueryError as err:
        raise HTTPException(400, f"q: {err}") from None
    wanted = _metrics(metrics)
    total, runs = await n.store.read(run_groups_sql.members, clauses, by, [(k, s) for _, k, s in wanted],
                                     MAX_GROUPED_RUNS)
    members = [Member(run_id, value, {asked: values.get((k, s)) for asked, k, s in wanted})
               for run_id, value, values in runs]
    return json_response(GroupsReply(by=by, runs=total, groups=group_rows(by, members, [a for a, _, _ in wanted])))


@router.get("/run-groups/series/{name:path}", summary="A series over several runs: its mean, min and max at each x",
            description="The series `name` of each run in `runs` (a group's, as `GET /run-groups` names them), "
                        "each label set on its own: at each x (bucketed into at most `max_points`), the mean of the "
                        "runs' values, their min and max, and how many runs had a point there.",
            response_class=Response,
            responses={200: ok(ref(BandsReply), {"name": "val_loss", "x": "step", "runs": ["r-a", "r-b"], "bands": [
                {"key": "val_loss", "labels": {}, "x": [0, 10], "mean": [0.9, 0.5], "min": [0.8, 0.4],
                 "max": [1.0, 0.6], "n": [2, 2]}]}), **ERRORS, **BUSY})
async def get_bands(
    request: Request, n: NissaDep,
    name: str,
    runs: Annotated[str, Query(max_length=20_000, pattern=_list_pattern(MAX_BAND_RUNS), description=_RUNS_DOC)],
    x: Annotated[Axis, Query(description="The x axis")] = "step",
    max_points: Annotated[int, Query(ge=10, le=5000, description="Most points of a band")] = 500,
) -> Response:
    run_ids = _run_ids(runs, MAX_BAND_RUNS)
    lines: dict[str, list[tuple[list[float], list[float]]]] = {}
    async with n.reads.client(request):  # a few at a time, a run's one at a time (``nissa_server.reads``)
        for rid in run_ids:
            run = await run_or_404(n, rid)
            try:
                async with n.reads.slot(rid):
                    page, world = await charted(n, _band_series, run.run_key, name, x, max_points)
            except series_queries.TooManySeries as err:
                raise HTTPException(422, f"run {rid!r}: {err}") from None
            for s in shape(rid, page.series, max_points, world):
                lines.setdefault(run_key(s.key, 1), []).append((s.x, s.y))  # rank 0's bands with a one-rank run's
    bands = [band(key, parse_key(key)[1], each, max_points) for key, each in sorted(lines.items())]
    return json_response(BandsReply(name=name, x=x, runs=run_ids, bands=bands))


def _band_series(conn: Conn, run_key: int, name: str, x: str, max_points: int) -> tuple[SeriesPage, int]:
    """On a reader thread: a run's series of ``name`` for a band, and the run's world size (what its keys show)."""
    page = series_queries.read_series(conn, run_key, name, x, None, max_points, None, MAX_BAND_SERIES)
    return page, ranks_sql.world_size(conn, run_key)


@router.get("/config-diff", summary="The config keys that differ between runs, with each run's value",
            description="The full configs of the runs in `runs` (in that order): every key whose "
                        "value is not the same in all of them, or that some lack, with each run's value as JSON "
                        "text (null: the run has no such key), and how many keys are the same.",
            response_class=Response,
            responses={200: ok(ref(ConfigDiff), {"runs": ["r-a", "r-b"], "names": ["lr 0.1", "lr 0.01"], "rows": [
                {"key": "lr", "values": ["0.1", "0.01"]}], "same": 12}), **ERRORS})
async def get_config_diff(
    n: NissaDep,
    runs: Annotated[str, Query(max_length=5000, pattern=_list_pattern(MAX_DIFF_RUNS), description=_RUNS_DOC)],
) -> Response:
    run_ids = _run_ids(runs, MAX_DIFF_RUNS)
    infos = []
    for rid in run_ids:
        info = await n.store.read(queries.get_run, rid, 0.0, n.server_id)
        if info is None:
            raise HTTPException(404, f"unknown run {rid!r}")
        infos.append(info)
    return json_response(config_diff(run_ids, [i.name for i in infos], [i.config or {} for i in infos]))
