"""Summaries (both stores) equal what a scan of the stored events gives: random streams of a loop's values
(NaN and infinities among them), directions declared at the start and later, values set outright, batches
sent again after a reconnect, a resume; and a database from before summaries gets them at its next open."""

from __future__ import annotations

import asyncio
import math
import re
import sqlite3

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leyline import Metrics, RunFinished, RunResumed, RunStarted, SummaryUpdated, decode_events, make_event
from leyline.metrics import as_float
from leyline.run_keys import shown_metrics
from leyline.series import points_of
from leyline.summaries import direction_of
from tests.support import IngestClient, running_server
from tests.support.waiting import wait_for

NAMES = ("val_loss", "acc", "lr", "grad/max")
_value = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from(["nan", "inf", "-inf"]))
_direction = st.sampled_from(["min", "max", "last"])
_payload = st.one_of(
    st.builds(lambda values, split: Metrics(values=values, labels={"split": split} if split else {}),
              st.dictionaries(st.sampled_from(NAMES), _value, min_size=1, max_size=3),
              st.sampled_from(["", "", "val"])),
    st.builds(lambda values, directions: SummaryUpdated(values=values, directions=directions),
              st.dictionaries(st.sampled_from(NAMES), _value, max_size=2),
              st.dictionaries(st.sampled_from(NAMES), _direction, max_size=2)),
)
_stream = st.fixed_dictionaries({
    "declared": st.dictionaries(st.sampled_from(NAMES), _direction, max_size=2),
    "payloads": st.lists(_payload, min_size=1, max_size=40),
    "cuts": st.lists(st.integers(1, 40), max_size=4),
    "resend": st.integers(0, 10),
    "resume_at": st.one_of(st.none(), st.integers(1, 40)),
})


def _events(run_id: str, stream: dict) -> list:
    payloads = [RunStarted(name=run_id, config={}, summary=stream["declared"]), *stream["payloads"]]
    if stream["resume_at"] is not None:
        at = min(stream["resume_at"], len(payloads))
        payloads.insert(at, RunResumed(checkpoint="c", path="p", round=0, checkpoint_step=0, checkpoint_epoch=0))
    payloads.append(RunFinished(status="completed", duration_s=1.0))
    step, out = 0, []
    for seq, payload in enumerate(payloads, 1):
        step = 0 if isinstance(payload, RunResumed) else step + 1  # a resume does the steps again
        out.append(make_event(payload, run_id=run_id, seq=seq, ts=1.7e9 + seq, step=step))
    return out


async def _send(url: str, events: list, cuts: list[int], resend: int) -> None:
    """In batches cut at ``cuts``, each connection after the first sending ``resend`` events again."""
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        async with IngestClient(url, events[0].run_id) as client:
            await client.send(events[max(0, lo - resend):hi])
            await client.wait_ack(events[hi - 1].seq)
        await asyncio.sleep(0.1)  # passes run between batches (every 0.02 s): summaries fold pass after pass


def _json(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def scanned(events: list) -> dict[str, dict]:
    """The summaries, from the stored events in stored order, under the keys the run shows."""
    declared: dict[str, str] = {}
    series: dict[str, dict] = {}
    world = 1
    for event in events:
        p = event.payload
        if isinstance(p, RunStarted):
            world = max(world, p.world_size)
        if isinstance(p, RunStarted) and event.rank == 0:
            declared.update(p.summary)
        if isinstance(p, SummaryUpdated):
            declared.update(p.directions)
            for name, value in p.values.items():
                _fold(series, f"{name}{{rank={event.rank}}}", name, as_float(value), event.step, pin=True)
        for point in points_of(event):
            _fold(series, point.key, point.name, point.value, event.step, pin=False)
    out = {}
    for key, s in series.items():
        direction = direction_of(s["name"], declared)
        best = s["last"] if s["pinned"] or direction == "last" else s["min"] if direction == "min" else s["max"]
        out[key] = {"last": _json(s["last"]), "min": _json(s["min"]), "max": _json(s["max"]), "best": _json(best),
                    "count": s["count"], "step": s["step"]}
    return shown_metrics(out, world)


def _fold(series: dict, key: str, name: str, value: float, step: int, pin: bool) -> None:
    s = series.setdefault(key, {"name": name, "count": 0, "min": None, "max": None, "last": None, "step": None,
                                "pinned": False})
    s["count"] += 1
    if value == value:
        s["min"] = value if s["min"] is None else min(s["min"], value)
        s["max"] = value if s["max"] is None else max(s["max"], value)
    if pin or not s["pinned"]:
        s["last"], s["step"] = (None if value != value else value), step
    s["pinned"] = s["pinned"] or pin


def _stored(http: httpx.Client, run_id: str) -> list:
    events, params = [], {"after_seq": 0, "limit": 10_000}
    while True:
        reply = http.get(f"/runs/{run_id}/events", params=params)
        page = decode_events(reply.content)
        events += page
        if "next" not in reply.links or not page:
            return events
        params.update(after_seq=page[-1].seq, after_rank=page[-1].rank)


@pytest.fixture
def lab(tmp_path):
    with running_server(tmp_path, series_interval_s=0.02) as url, httpx.Client(base_url=url, timeout=30) as http:
        yield url, http


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(stream=_stream, n=st.integers(0, 10**9))
def test_summaries_equal_a_scan_of_the_stored_events(lab, stream, n):
    url, http = lab
    run_id = f"p{n}"
    if http.get(f"/runs/{run_id}").status_code == 200:
        return  # hypothesis drew an id it used already
    events = _events(run_id, stream)
    asyncio.run(_send(url, events, stream["cuts"], stream["resend"]))
    stored = _stored(http, run_id)
    assert [e.seq for e in stored] == [e.seq for e in events], "each event stored once"
    expected = scanned(stored)
    wait_for(lambda: http.get(f"/runs/{run_id}").json()["metrics"] == expected, timeout=30,
             message="summaries as scanned")


def test_an_old_database_gets_summaries_and_config_rows_at_its_next_open(tmp_path, backend):
    # A database of the schema before summaries: the last migration's tables dropped and its counter row gone,
    # as a server of the previous version left them (its series charted).
    events = _events("old", {"declared": {}, "payloads": [Metrics(values={"val_loss": v, "acc": 1 - v})
                                                          for v in (0.9, 0.4, 0.6)],
                             "cuts": [], "resend": 0, "resume_at": None})
    events[0] = make_event(RunStarted(name="old", config={"lr": 0.1, "opt": "adam"}), run_id="old", seq=1, ts=1.7e9)
    with running_server(tmp_path, series_interval_s=0.02) as url, httpx.Client(base_url=url, timeout=30) as http:
        asyncio.run(_send(url, events, [], 0))
        wait_for(lambda: "val_loss" in http.get("/runs/old").json()["metrics"], timeout=30, message="pass")
        settings_ = url.settings
    _downgrade(settings_, backend)
    with running_server(tmp_path, series_interval_s=0.02) as url, httpx.Client(base_url=url, timeout=30) as http:
        run = http.get("/runs/old").json()
        assert run["metrics"]["val_loss"] == {"last": 0.6, "min": 0.4, "max": 0.9, "best": 0.4, "count": 3,
                                                      "step": 4}
        assert run["metrics"]["acc"]["best"] == pytest.approx(0.6)
        assert [r["run_id"] for r in http.get("/runs", params={"q": "config.opt:adam val_loss<0.5"}).json()] == ["old"]


def _downgrade(settings_, backend: str) -> None:
    from nissa_server.store import migrations
    from tests.support.databases import side_connection

    side = side_connection(settings_)
    for table in ("run_metrics", "metric_directions", "run_tags", "run_params"):
        side.execute(f"DROP TABLE {table}")
    for index in ("runs_created", "runs_project", "runs_group"):
        side.execute(f"DROP INDEX {index}")
    side.execute("DELETE FROM counters WHERE name = 'lab_backfilled'")
    for later in migrations.MIGRATIONS[10:]:  # what the migrations after v10 made, made again once it is v9
        for table in re.findall(r"CREATE TABLE (\w+)", later.sql):
            side.execute(f"DROP TABLE {table}")
    if backend == "sqlite":
        for column in ("project", "run_group", "notes"):
            side.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        side.execute("PRAGMA user_version = 9")
    else:
        side.execute("ALTER TABLE runs DROP COLUMN project, DROP COLUMN run_group, DROP COLUMN notes")
        side.execute("UPDATE nissa_schema SET version = 9")  # the shared list's number, as SQLite's
    side.close()
    assert sqlite3  # the side connection is sqlite3's on SQLite
