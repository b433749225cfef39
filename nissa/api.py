"""``nissa.Api``: a lab's runs as data, for notebooks and scripts.

    api = nissa.Api("http://127.0.0.1:8765")
    for run in api.runs(q="group:lr-sweep", sort="val_loss.best"):
        print(run.name, run.config["lr"], run.metrics["val_loss"].best)  # val_loss{rank=N} with several ranks
    frame = api.runs_frame(project="cifar")              # a pandas DataFrame, a row per run
    points = api.history(run.run_id, keys=["val_loss"])  # every point, from the stored events

``runs`` pages through ``GET /runs`` (the server's filter language and sorts) until every match is read, each run
a ``leyline.RunSummary`` (the row every runs table reads); ``run`` is one ``leyline.RunDetail``;
``history`` reads the run's events of the kinds the keys come from, a page at a time, and takes their points
as the server does (``leyline.series``): not downsampled, nothing left out. Series keys are as the run shows them
(``leyline.run_keys``): ``val_loss`` in a run of one rank, ``val_loss{rank=1}`` in one of several. No torch, and
pandas only for ``runs_frame`` and ``history_frame``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any, Self

import httpx
import msgspec

from leyline import Event, RunDetail, RunSummary, decode_events
from leyline.busy import BUSY_RETRIES, retry_after_s
from leyline.query import short_key, term
from leyline.run_keys import shown_key, stored_key
from leyline.series import internal as is_internal
from leyline.series import kind_of_name, parse_key, points_of, x_of
from leyline.summaries import STATS

PAGE = 500
"""Runs asked for per request (the server's largest page)."""
EVENTS_PAGE = 10_000
_runs = msgspec.json.Decoder(list[RunSummary])
_run = msgspec.json.Decoder(RunDetail)


def refusal(reply: httpx.Response) -> str:
    """Why the server refused a request: its reply's ``detail``, else the reply's text."""
    try:
        body = reply.json()
    except ValueError:
        return reply.text
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, str) else reply.text


class ApiError(Exception):
    """The server refused a request (a mistake in a query names its position) or could not be reached."""


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError("nissa.Api: a DataFrame needs pandas, which is not installed (pip install pandas); "
                          "Api.runs and Api.history need nothing more") from None
    return pandas


class ServerClient:
    """One nissa-server's HTTP API (``token``: default ``$NISSA_TOKEN``, needed where the server protects what is
    asked); ``_who`` names the caller in its refusals. A context manager that closes its connections."""

    _who = "nissa.Api"

    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        from nissa import env
        from nissa.checks import check_server
        from nissa.hub.rest import http_url

        check_server(server, "server", self._who)
        token = token if token is not None else env.token() or None
        self.server = http_url(server, "")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Api(ServerClient):
    """A nissa-server's runs (``token``: default ``$NISSA_TOKEN``, needed where the server protects reads)."""

    def _get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        """A read; one answered 429 (the server serves everyone first) asked again after its ``Retry-After``
        (``leyline.busy``)."""
        for attempt in range(BUSY_RETRIES + 1):
            try:
                reply = self._http.get(path, params=params)
            except httpx.HTTPError as err:
                raise ApiError(f"nissa.Api: no answer from {self.server}: {err}") from None
            if reply.status_code != 429 or attempt == BUSY_RETRIES:
                break
            time.sleep(retry_after_s(reply.headers.get("Retry-After")))
        if reply.status_code >= 400:
            raise ApiError(f"nissa.Api: {reply.request.method} {reply.request.url.path}: {reply.status_code} "
                           f"{refusal(reply)}")
        return reply

    def runs(self, q: str | None = None, *, project: str | None = None, group: str | None = None,
             sort: str | None = None, limit: int | None = None,
             metrics: Sequence[str] | None = None) -> list[RunSummary]:
        """The runs matching ``q`` (the server's filter language) and ``project``/``group``, in ``sort`` order
        (newest first by default): every one, or the first ``limit``. ``metrics``: only these summaries."""
        return list(self.iter_runs(q, project=project, group=group, sort=sort, limit=limit, metrics=metrics))

    def iter_runs(self, q: str | None = None, *, project: str | None = None, group: str | None = None,
                  sort: str | None = None, limit: int | None = None,
                  metrics: Sequence[str] | None = None) -> Iterator[RunSummary]:
        """``runs``, a page at a time."""
        terms = [q or ""] + [term(name, value) for name, value in (("project", project), ("group", group))
                             if value is not None]
        params: dict[str, Any] = {k: v for k, v in (("q", " ".join(t for t in terms if t)), ("sort", sort)) if v}
        if metrics is not None:
            params["metrics"] = ",".join(metrics)
        offset, seen = 0, 0
        while limit is None or seen < limit:
            size = PAGE if limit is None else min(PAGE, limit - seen)
            page = _runs.decode(self._get("/runs", {**params, "limit": size, "offset": offset}).content)
            yield from page
            seen += len(page)
            offset += len(page)
            if len(page) < size:
                return

    def run(self, run_id: str) -> RunDetail:
        """One run, its whole config and every series' summary."""
        return _run.decode(self._get(f"/runs/{_path(run_id)}").content)

    def runs_frame(self, q: str | None = None, *, project: str | None = None, group: str | None = None,
                   sort: str | None = None, limit: int | None = None, stats: Sequence[str] = ("best", "last"),
                   metrics: Sequence[str] | None = None, internal: bool = False) -> Any:
        """``runs`` as a pandas DataFrame: a row per run, columns ``id``, ``name``, ``status``, ``project``,
        ``group``, ``tags`` (joined by commas), ``notes``, ``config.<key>`` and ``<series key>.<stat>`` for each
        of ``stats``, the key as a query writes it (``val_loss.best``: rank 0's in a run of several ranks, whose
        others are ``val_loss{rank=1}.best`` …). The series of the runs' machinery (``leyline.series.internal``:
        ``hub_health.*``, ``run_started.*``, ``system.*`` …) only with ``internal``, or named in ``metrics``."""
        unknown = sorted(set(stats) - set(STATS))
        if unknown:
            raise ValueError(f"nissa.Api.runs_frame: stats are among {', '.join(STATS)}, not {', '.join(unknown)}")
        pandas = _pandas()
        rows = []
        for run in self.iter_runs(q, project=project, group=group, sort=sort, limit=limit, metrics=metrics):
            row: dict[str, Any] = {"id": run.run_id, "name": run.name, "status": run.status, "project": run.project,
                                   "group": run.group, "tags": ",".join(run.tags), "notes": run.notes}
            row.update({f"config.{k}": v for k, v in run.config.items()})
            for key, summary in run.metrics.items():
                if internal or metrics is not None or not is_internal(key):
                    row.update({f"{short_key(key)}.{stat}": getattr(summary, stat) for stat in stats})
            rows.append(row)
        return pandas.DataFrame(rows)

    def history(self, run_id: str, keys: Sequence[str], x: str = "step") -> dict[str, list[tuple[float, float]]]:
        """Every point of the series ``keys`` (a name: each of its label sets; or a whole key, ``acc{env=0}``, rank 0's
        where it names no rank) as ``(x, value)`` in stored order, by series key as the run shows it (the rank only in
        a run of several); ``x`` is ``step``, ``epoch``, ``round`` or ``ts``
        (points without a place on it are left out). Read from the run's events, a page at a time."""
        if x not in ("step", "epoch", "round", "ts"):
            raise ValueError(f"nissa.Api.history: x must be step, epoch, round or ts, got {x!r}")
        names = {k for k in keys if "{" not in k}
        whole = {stored_key(k) for k in keys if "{" in k}
        kinds = sorted({kind_of_name(parse_key(k)[0]) for k in keys})
        world = self.run(run_id).world_size
        out: dict[str, list[tuple[float, float]]] = {}
        for event in self._events(run_id, kinds):
            for point in points_of(event):
                if point.name in names or point.key in whole:
                    at = x_of(point, x)
                    if at is not None:
                        out.setdefault(shown_key(point.key, world), []).append((at, point.value))
        return out

    def history_frame(self, run_id: str, keys: Sequence[str], x: str = "step") -> Any:
        """``history`` as a pandas DataFrame, a row per point: ``key``, ``x``, ``value``."""
        pandas = _pandas()
        rows = [(key, at, value) for key, points in self.history(run_id, keys, x).items() for at, value in points]
        return pandas.DataFrame(rows, columns=["key", x, "value"])

    def _events(self, run_id: str, kinds: list[str]) -> Iterator[Event]:
        params: dict[str, Any] = {"kind": ",".join(kinds), "limit": EVENTS_PAGE, "after_seq": 0}
        while True:
            reply = self._get(f"/runs/{_path(run_id)}/events", params)
            events = decode_events(reply.content)
            yield from events
            if "next" not in reply.links or not events:
                return
            params.update(after_seq=events[-1].seq, after_rank=events[-1].rank)


def _path(run_id: str) -> str:
    import urllib.parse

    return urllib.parse.quote(run_id, safe="")
