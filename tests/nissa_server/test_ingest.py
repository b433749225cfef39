"""/ws/ingest against a real server: acks, de-duplication, gaps, superseding, and every way a frame
can be refused, each closing only its own connection while a neighbour keeps streaming."""

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect

from leyline import encode
from leyline.frames import (
    CLOSE_BAD_FRAME,
    CLOSE_SUPERSEDED,
    CLOSE_TOO_LARGE,
    CLOSE_UNSUPPORTED,
    EventBatch,
    Hello,
)
from tests.support import SECRET, IngestClient, close_of, events_for, running_server, ws_url
from tests.support.databases import allow_all, refuse_seq


async def test_acks_highest_contiguous_and_drops_duplicates(server_url):
    events = events_for("dup", 15)
    async with IngestClient(server_url, "dup") as client:
        await client.send(events[:10])
        await client.wait_ack(10)
        await client.send(events[5:])  # 6..10 again, as they were; 11..15 new
        await client.wait_ack(15)
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        events = (await http.get("/runs/dup/events", params={"rank": 0})).json()
        assert [e["seq"] for e in events] == list(range(1, 16))
        metrics = (await http.get("/metrics")).text
    assert "nissa_events_duplicate_total 5.0" in metrics
    assert "nissa_events_ingested_total 15.0" in metrics


async def test_gap_holds_the_ack_until_filled(server_url):
    evs = events_for("gap", 5)
    async with IngestClient(server_url, "gap") as client:
        await client.send(evs[:2] + evs[3:])  # 1, 2, 4, 5
        assert await client.wait_ack(2) == 2
        await client.send([evs[2]])
        assert await client.wait_ack(5) == 5


async def test_welcome_reports_what_is_stored_after_a_reconnect_and_a_restart(tmp_path):
    with running_server(tmp_path) as url:
        async with IngestClient(url, "again") as client:
            await client.send(events_for("again", 30))
            await client.wait_ack(30)
        async with IngestClient(url, "again") as client:
            assert client.welcome.last_seq == 30
    with running_server(tmp_path) as url:  # same database file
        async with IngestClient(url, "again") as client:
            assert client.welcome.last_seq == 30
            await client.send(events_for("again", 40))  # 1..30 are duplicates now
            assert await client.wait_ack(40) == 40
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            run = (await http.get("/runs/again")).json()
    assert run["last_seq"] == {"0": 40} and sum(run["counts"].values()) == 40


async def test_a_second_connection_supersedes_the_first(server_url):
    async with IngestClient(server_url, "sup") as first:
        async with IngestClient(server_url, "sup") as second:
            code, reason = await close_of(first.ws)
            assert code == CLOSE_SUPERSEDED and "sup" in reason
            await second.send(events_for("sup", 3))
            assert await second.wait_ack(3) == 3


async def test_other_rank_is_not_superseded(server_url):
    async with IngestClient(server_url, "ranks", rank=0) as r0, IngestClient(server_url, "ranks", rank=1) as r1:
        await r0.send(events_for("ranks", 3))
        await r1.send(events_for("ranks", 4, rank=1))
        assert await r0.wait_ack(3) == 3 and await r1.wait_ack(4) == 4


def _hello(run_id="bad"):
    return encode(Hello(run_id=run_id, secret=SECRET)).decode()


def _batch(run_id="bad", n=1, **change):
    events = json.loads(encode(EventBatch(events=events_for(run_id, n))))
    for event in events["events"]:
        event.update(change)
    return json.dumps(events)


HUGE = "x" * (300 * 1024)
CASES = {
    "not json": (_hello(), "{nope", CLOSE_BAD_FRAME),
    "unknown frame type": (_hello(), '{"type": "teleport"}', CLOSE_BAD_FRAME),
    "invalid event": (_hello(), _batch(seq=0), CLOSE_BAD_FRAME),
    "payload of the wrong shape": (_hello(), _batch(payload={"uptime_s": "soon"}), CLOSE_BAD_FRAME),
    "unknown kind": (_hello(), _batch(kind="weather_report"), CLOSE_UNSUPPORTED),
    "newer schema": (_hello(), _batch(v=99), CLOSE_UNSUPPORTED),
    "other run": (_hello(), _batch(run_id="someone-else"), CLOSE_BAD_FRAME),
    "other rank": (_hello(), _batch(rank=3), CLOSE_BAD_FRAME),
    "events before hello": (_batch(), None, CLOSE_BAD_FRAME),
    "hello as server rank": (encode(Hello(run_id="bad", rank=-1, secret=SECRET)).decode(), None, CLOSE_BAD_FRAME),
    "hello with a huge name": (_hello().replace('"name":""', '"name":"%s"' % ("x" * 1_000_000)), None,
                               CLOSE_BAD_FRAME),
    "hello for a dot run id": (_hello().replace('"run_id":"bad"', '"run_id":".."'), None, CLOSE_BAD_FRAME),
    "hello for a formula run id": (_hello().replace('"run_id":"bad"', '"run_id":"-2+3"'), None, CLOSE_BAD_FRAME),
    "second hello": (_hello(), _hello(), CLOSE_BAD_FRAME),
    "oversized frame": (_hello(), "[" + " " * (5 * 1024 * 1024) + "]", CLOSE_TOO_LARGE),
    "too many events": (_hello(), _batch(n=5001), CLOSE_TOO_LARGE),
    "run started with a long name": (_hello(), _batch(kind="run_started", payload={"name": "x" * 201, "config": {}}),
                                     CLOSE_BAD_FRAME),
    "oversized event": (_hello(), _batch(kind="run_started", payload={"name": "x", "config": {"k": HUGE}}),
                        CLOSE_TOO_LARGE),
}


async def _refusal(url: str, first: str, second: str | None) -> tuple[int, str]:
    """Send ``first`` (and, after the welcome, ``second``) on a fresh ingest socket; the close it gets."""
    async with connect(ws_url(url, "/ws/ingest"), max_size=None) as bad:
        await bad.send(first)
        if second is not None:
            await bad.recv()  # welcome
            await bad.send(second)
        return await close_of(bad)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_bad_frame_closes_only_its_connection(server_url, case):
    first, second, expected = CASES[case]
    async with IngestClient(server_url, "neighbour") as neighbour:
        await neighbour.send(events_for("neighbour", 5))
        code, reason = await _refusal(server_url, first, second)
        assert code == expected, reason
        assert reason
        await neighbour.send(events_for("neighbour", 5, start_seq=6))
        assert await neighbour.wait_ack(10) == 10


DEEP = "[" * 20_000 + "]" * 20_000  # far past the interpreter's recursion limit, within every size limit


async def test_deeply_nested_json_is_a_bad_frame_and_counted_everywhere(server_url):
    deep_event = _batch().replace('"payload": {', f'"payload": {{"x": {DEEP}, ', 1)
    assert DEEP in deep_event
    for first, second in ((_hello(), deep_event), (f'{{"type":"hello","run_id":"a","more":{DEEP}}}', None)):
        code, reason = await _refusal(server_url, first, second)
        assert code == CLOSE_BAD_FRAME and "nested too deeply" in reason
    async with connect(ws_url(server_url, "/ws/watch")) as watcher, IngestClient(server_url, "after") as client:
        await watcher.send(DEEP)  # what a watcher sends is never parsed
        await client.send(events_for("after", 1))
        assert json.loads(await watcher.recv())["events"][0]["run_id"] == "after"
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as http:
        resp = await http.post("/escalate", content=f'{{"run_id":"after","action":"debug","epochs":1,"reason":{DEEP}}}')
        assert resp.status_code == 422
        metrics = (await http.get("/metrics")).text
    assert 'nissa_frames_rejected_total{reason="bad_frame"} 2.0' in metrics


async def test_hello_timeout_closes(tmp_path):
    with running_server(tmp_path, hello_timeout_s=0.3) as url:
        async with connect(ws_url(url, "/ws/ingest")) as ws:
            code, reason = await close_of(ws)
    assert code == CLOSE_BAD_FRAME and "hello" in reason


async def test_many_connections_stream_concurrently(server_url):
    async def one(i):
        async with IngestClient(server_url, f"many-{i}") as client:
            for start in range(1, 401, 100):
                await client.send(events_for(f"many-{i}", 100, start_seq=start))
            return await client.wait_ack(400)

    assert await asyncio.gather(*(one(i) for i in range(8))) == [400] * 8


async def test_a_failed_write_closes_the_connection_and_a_reconnect_resends_without_loss(tmp_path):
    with running_server(tmp_path) as url:
        async with IngestClient(url, "fault") as client:
            await client.send(events_for("fault", 10))
            await client.wait_ack(10)
        refuse_seq(url.settings, 15, "disk says no")
        async with IngestClient(url, "fault") as client:
            await client.send(events_for("fault", 10, start_seq=11))
            code, reason = await close_of(client.ws)
        assert code == 1011 and "disk says no" in reason
        allow_all(url.settings)
        async with IngestClient(url, "fault") as client:
            assert client.welcome.last_seq == 10
            await client.send(events_for("fault", 10, start_seq=11))
            assert await client.wait_ack(20) == 20
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            events = (await http.get("/runs/fault/events")).json()
        assert [e["seq"] for e in events] == list(range(1, 21))
