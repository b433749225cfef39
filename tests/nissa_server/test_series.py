"""The series API on a real server (both stores): listing, one name downsampled, overlays, csv,
incremental reads, markers; and the downsampling that keeps each bucket's extremes."""

import asyncio
import json
import math

import httpx
import numpy as np
import pytest

from leyline import CommandAction, CommandStatus, CommandStatusChanged, decode_event, make_event
from leyline.esper import EpochCompleted, SeedFossilized
from leyline.run_keys import shown_key
from leyline.series import points_of
from nissa_server.series import downsample
from nissa_server.store.series_sql import MERGE_AT
from tests.support import IngestClient, collect_watch


def _epochs(run_id, n, envs=2, start_seq=1, acc=lambda i: i / 100):
    """``n`` epoch_completed events per env, seq contiguous; accuracy ``acc(i)`` at the i-th epoch."""
    out, seq = [], start_seq
    for i in range(n):
        for env in range(envs):
            payload = EpochCompleted(round=i // 4, accuracy=acc(i) + env, val_loss=1.0, train_loss=None)
            out.append(make_event(payload, run_id=run_id, seq=seq, ts=1.7e9 + seq, step=10 * i, epoch=i, env=env))
            seq += 1
    return out


@pytest.fixture
async def http(server_url):
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:
        yield client


async def _send(server_url, run_id, batches):
    async with IngestClient(server_url, run_id) as client:
        for events in batches:
            await client.send(events)
            await client.wait_ack(events[-1].seq)


async def test_series_are_listed_read_per_label_overlaid_and_exported(server_url, http):
    events = _epochs("a", 30)
    # One event a batch for a while, then the rest (the rows a series pass writes and their merges are
    # test_series_pass's; here a read may find them written or not yet).
    await _send(server_url, "a", [[e] for e in events[:2 * MERGE_AT + 3]] + [events[2 * MERGE_AT + 3:]])
    await _send(server_url, "b", [_epochs("b", 5, envs=1, acc=lambda i: 0.5)])
    listing = {s["key"]: s for s in (await http.get("/runs/a/series")).json()}
    acc0 = listing["epoch_completed.accuracy{env=0}"]
    assert acc0 == {"key": "epoch_completed.accuracy{env=0}", "name": "epoch_completed.accuracy",
                    "labels": {"env": "0"}, "points": 30, "kind": "epoch_completed"}
    assert "epoch_completed.train_loss{env=0}" not in listing, "None is not a point"

    reply = (await http.get("/runs/a/series/epoch_completed.accuracy")).json()
    assert reply["name"] == "epoch_completed.accuracy" and reply["x"] == "step"
    by_key = {s["key"]: s for s in reply["series"]}
    assert set(by_key) == {"epoch_completed.accuracy{env=0}", "epoch_completed.accuracy{env=1}"}
    env1 = by_key["epoch_completed.accuracy{env=1}"]
    assert env1["x"] == [10.0 * i for i in range(30)] and env1["y"] == pytest.approx([1 + i / 100 for i in range(30)])

    overlay = (await http.get("/runs/a/series/epoch_completed.accuracy",
                              params={"labels": "env=0", "runs": "b", "x": "epoch"})).json()
    assert [(s["run_id"], s["labels"]["env"]) for s in overlay["series"]] == [("a", "0"), ("b", "0")]
    assert overlay["series"][1]["x"] == [0.0, 1.0, 2.0, 3.0, 4.0] and overlay["series"][1]["y"] == [0.5] * 5
    by_round = (await http.get("/runs/b/series/epoch_completed.accuracy", params={"x": "round"})).json()
    assert by_round["series"][0]["x"] == [0.0, 0.0, 0.0, 0.0, 1.0]

    later = (await http.get("/runs/a/series/epoch_completed.accuracy", params={"after": 250, "labels": "env=1"})).json()
    assert later["series"][0]["x"] == [260.0, 270.0, 280.0, 290.0]

    csv = (await http.get("/runs/b/series/epoch_completed.accuracy", params={"format": "csv"}))
    assert csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.splitlines()
    assert lines[0] == "run_id,key,x,y" and lines[1] == 'b,epoch_completed.accuracy{env=0},0.0,0.5'
    assert len(lines) == 6


async def test_incremental_reads_give_each_new_point_once_in_order(server_url, http):
    events = _epochs("live", 12, envs=1)
    seen, after = [], None
    async with IngestClient(server_url, "live") as client:
        for chunk in (events[:5], events[5:6], events[6:]):
            await client.send(chunk)
            await client.wait_ack(chunk[-1].seq)
            params = {} if after is None else {"after": after}
            got = (await http.get("/runs/live/series/epoch_completed.accuracy", params=params)).json()["series"]
            if got:
                seen += got[0]["x"]
                after = got[0]["x"][-1] if got[0]["x"] else after
    assert seen == [10.0 * i for i in range(12)]


async def test_markers_say_what_happened(server_url, http):
    fossil = SeedFossilized(slot="r0c0", seed_id="s1", blueprint="conv", params=10)
    applied = CommandStatusChanged(command_id="c", action=CommandAction.DEBUG, status=CommandStatus.APPLIED)
    delivered = CommandStatusChanged(command_id="c", action=CommandAction.DEBUG, status=CommandStatus.DELIVERED)
    events = [make_event(p, run_id="m", seq=i + 1, ts=1.7e9 + i, step=100 * i)
              for i, p in enumerate((delivered, applied, fossil))]
    await _send(server_url, "m", [events])
    marks = (await http.get("/runs/m/markers")).json()
    assert [(m["kind"], m["label"], m["step"]) for m in marks] == [("command", "debug applied", 100),
                                                                    ("fossilized", "r0c0 conv", 200)]
    assert [m["kind"] for m in (await http.get("/runs/m/markers", params={"after": 100})).json()] == ["fossilized"]


async def test_bad_requests_get_a_reason(server_url, http):
    await _send(server_url, "v", [_epochs("v", 2, envs=1)])
    assert (await http.get("/runs/nope/series")).status_code == 404
    assert (await http.get("/runs/v/series/x", params={"runs": "nope"})).status_code == 404
    bad = await http.get("/runs/v/series/epoch_completed.accuracy", params={"labels": "env"})
    assert bad.status_code == 422 and "name=value" in bad.json()["detail"]
    many = await http.get("/runs/v/series/x", params={"runs": ",".join(f"r{i}" for i in range(20))})
    assert many.status_code == 422 and "at most" in many.json()["detail"]
    assert (await http.get("/runs/v/series/x", params={"x": "wall"})).status_code == 422
    assert (await http.get("/runs/v/series/x", params={"after": "nan"})).status_code == 422
    assert (await http.get("/runs/v/series/no.such")).json()["series"] == []


@pytest.mark.single_backend
def test_downsampling_keeps_every_buckets_min_and_max():
    rng = np.random.default_rng(7)
    n, max_points = 200_000, 2000
    x = np.arange(n, dtype=np.float64)
    y = rng.normal(size=n)
    spikes = np.arange(50, n, n // 200)  # one spike up or down in many buckets
    y[spikes] = np.where(np.arange(len(spikes)) % 2 == 0, 50.0, -50.0) + rng.normal(size=len(spikes))
    xs, ys = downsample(x, y, max_points)
    assert len(xs) <= max_points and np.all(np.diff(xs) > 0)
    assert set(y[spikes]) <= set(ys), "every spike survives"
    edges = np.linspace(x[0], x[-1], max_points // 2 + 1)
    bucket = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, max_points // 2 - 1)
    kept = set(ys)
    for b in rng.choice(max_points // 2, 50, replace=False):
        inside = y[bucket == b]
        assert inside.min() in kept and inside.max() in kept


@pytest.mark.single_backend
def test_downsampling_orders_a_resumed_run_and_keeps_nan_and_infinities():
    x = np.array([0.0, 1, 2, 3, 1, 2, 3, 4] * 1000)
    y = np.linspace(0, 1, len(x))
    y[10], y[20] = math.nan, math.inf
    xs, ys = downsample(x, y, 100)
    assert np.all(np.diff(xs) >= 0) and len(xs) <= 100
    assert np.isinf(ys).any() and np.isnan(ys).any()
    small_x, small_y = downsample(x[:8], y[:8], 100)
    assert list(small_x) == [0, 1, 1, 2, 2, 3, 3, 4]


async def test_a_watcher_applying_the_definition_gets_the_stored_series_once_in_order(server_url, http):
    # What a console does live: each event of /ws/watch through leyline.series.points_of. Its points
    # are the server's series, each once and in order, with no read of the history.
    events = _epochs("w", 9, envs=2)
    watching = asyncio.create_task(collect_watch(server_url, len(events), run_id="w"))
    async with IngestClient(server_url, "w") as client:
        for chunk in (events[:4], events[4:11], events[11:]):
            await client.send(chunk)
            await client.wait_ack(chunk[-1].seq)
    seen, _ = await watching
    live: dict[str, list[tuple[float, float]]] = {}
    for raw in seen:
        for point in points_of(decode_event(json.dumps(raw))):
            live.setdefault(shown_key(point.key, 1), []).append((float(point.step), point.value))  # one rank
    stored = (await http.get("/runs/w/series/epoch_completed.accuracy")).json()["series"]
    assert {s["key"] for s in stored} == {k for k in live if k.startswith("epoch_completed.accuracy")}
    for s in stored:
        assert live[s["key"]] == list(zip(s["x"], s["y"], strict=True))


@pytest.mark.single_backend
async def test_reads_need_the_token_and_a_browser_websocket_gives_it_as_a_subprotocol(tmp_path):
    import base64

    from websockets.asyncio.client import connect

    from tests.support import close_of, ws_url
    from tests.support.server import running_server

    token = "web-page-token"
    with running_server(tmp_path, token=token, read_auth=True) as url:
        good = "nissa.bearer." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
        async with connect(ws_url(url, "/ws/watch"), subprotocols=["nissa", good]) as ws:
            assert ws.subprotocol == "nissa"
            with pytest.raises(TimeoutError):  # accepted: it waits for events, it is not closed
                await asyncio.wait_for(ws.recv(), 0.3)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for path in ("/runs", "/runs/x/series", "/runs/x/series/a.b", "/runs/x/markers"):
                assert (await http.get(path)).status_code == 401, path
            assert (await http.get("/ui")).status_code == 200, "the page itself holds no data"
        for offered in (["nissa"], ["nissa", "nissa.bearer.d3Jvbmc"], ["nissa", "nissa.bearer.%%%"]):
            async with connect(ws_url(url, "/ws/watch"), subprotocols=offered) as ws:
                code, reason = await close_of(ws)
                assert code == 4401 and "token" in reason


async def test_a_long_series_is_read_from_summaries_that_keep_every_spike(server_url, http):
    spikes = {137: 9.0, 1290: -9.0, 2555: 7.0}
    events = _epochs("long", 3000, envs=1, acc=lambda i: spikes.get(i, (i % 7) / 10))
    await _send(server_url, "long", [events[i:i + 1000] for i in range(0, 3000, 1000)])
    short = (await http.get("/runs/long/series/epoch_completed.accuracy", params={"max_points": 50})).json()
    series = short["series"][0]
    assert series["points"] == 3000 and len(series["y"]) <= 50
    assert set(spikes.values()) <= set(series["y"]) and min(series["x"]) == 0.0
    full = (await http.get("/runs/long/series/epoch_completed.accuracy", params={"max_points": 20000})).json()
    assert len(full["series"][0]["y"]) == 3000
